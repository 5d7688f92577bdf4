package topology

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/internal/testutil"
)

// withFiles returns a copy of the named real dump with files added (content
// "DELETE" removes one).
func withFiles(t *testing.T, name string, files map[string]string) fstest.MapFS {
	t.Helper()
	m := cloneFS(testutil.SysfsFromTarBz2(t, name))
	for p, c := range files {
		if c == "DELETE" {
			delete(m, p)
			continue
		}
		m[p] = &fstest.MapFile{Data: []byte(c)}
	}
	return m
}

// TestDiscoverIsolatedCPUs reads isolated CPUs (issue 21 §4, issue 18's
// isolcpus=6,7 nohz_full=6,7) from a real dual-socket dump carrying the
// kernel's files: the model, the JSON document (both ways) and the text
// view.
func TestDiscoverIsolatedCPUs(t *testing.T) {
	tests := []struct {
		name                     string
		files                    map[string]string
		isolated, nohz, isolcpus string
		line                     string // the text view's line, "" for none
	}{
		{name: "no files (old kernel)", files: nil},
		{
			name:  "files empty, nohz_full (null)",
			files: map[string]string{isolatedFile: "\n", nohzFullFile: "(null)\n"},
		},
		{
			name:     "isolcpus=6,7 nohz_full=6,7",
			files:    map[string]string{isolatedFile: "6-7\n", nohzFullFile: "6-7\n"},
			isolated: "6-7", nohz: "6-7", isolcpus: "6-7",
			line: "Isolated: 6-7 (isolcpus), nohz_full: 6-7",
		},
		{
			name:     "nohz_full only",
			files:    map[string]string{isolatedFile: "\n", nohzFullFile: "1-7\n"},
			isolated: "", nohz: "1-7",
			line: "Nohz_full: 1-7",
		},
		{
			name:     "cgroup v2 isolated partition and isolcpus",
			files:    map[string]string{isolatedFile: "7\n", partitionsFile: "4-5\n"},
			isolated: "4-5,7", isolcpus: "7",
			line: "Isolated: 4-5,7 (isolcpus 7; cgroup isolated partition 4-5)",
		},
		{
			name:     "isolated names cpus that are not present",
			files:    map[string]string{isolatedFile: "6-7,200-201\n"},
			isolated: "6-7", isolcpus: "6-7",
			line: "Isolated: 6-7 (isolcpus)",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			topo := mustDiscover(t, withFiles(t, "8em64t-2s2ca2c", tc.files))
			if got := topo.Isolated().String(); got != tc.isolated {
				t.Errorf("Isolated() = %q, want %q", got, tc.isolated)
			}
			if got := topo.NohzFull().String(); got != tc.nohz {
				t.Errorf("NohzFull() = %q, want %q", got, tc.nohz)
			}
			if got := topo.Isolation().Isolcpus.String(); got != tc.isolcpus {
				t.Errorf("Isolation().Isolcpus = %q, want %q", got, tc.isolcpus)
			}
			var text strings.Builder
			if err := topo.Render(&text, RenderOptions{}); err != nil {
				t.Fatal(err)
			}
			hasLine := strings.Contains(text.String(), "\n"+tc.line+"\n")
			if tc.line == "" {
				hasLine = !strings.Contains(text.String(), "Isolated") && !strings.Contains(text.String(), "nohz_full")
			}
			if !hasLine {
				t.Errorf("text view, want line %q:\n%s", tc.line, text.String())
			}
			b, err := json.Marshal(topo.Doc())
			if err != nil {
				t.Fatal(err)
			}
			var keys map[string]json.RawMessage
			if err := json.Unmarshal(b, &keys); err != nil {
				t.Fatal(err)
			}
			for key, want := range map[string]string{"isolated": tc.isolated, "nohz_full": tc.nohz} {
				raw, ok := keys[key]
				if want == "" {
					if ok {
						t.Errorf("document has %q = %s, want it left out", key, raw)
					}
					continue
				}
				if string(raw) != `"`+want+`"` {
					t.Errorf("document %q = %s, want %q", key, raw, want)
				}
			}
			back, err := ReadDoc(bytes.NewReader(b))
			if err != nil {
				t.Fatalf("ReadDoc: %v", err)
			}
			if !back.Isolated().Equals(topo.Isolated()) || !back.NohzFull().Equals(topo.NohzFull()) {
				t.Errorf("ReadDoc: isolated %s nohz_full %s, want %s %s", back.Isolated(), back.NohzFull(), topo.Isolated(), topo.NohzFull())
			}
		})
	}
}

// Bad content in the isolation files is an error naming the file (a dump
// to fix); a document naming CPUs the machine lacks is bad input.
func TestIsolatedBadInput(t *testing.T) {
	for _, f := range []string{isolatedFile, nohzFullFile, partitionsFile} {
		_, err := Discover(withFiles(t, "8em64t-2s2ca2c", map[string]string{f: "6-\n"}))
		if !errors.Is(err, ErrBadSysfs) || !strings.Contains(err.Error(), f) {
			t.Errorf("%s = %q: err %v, want ErrBadSysfs naming the file", f, "6-", err)
		}
	}
	topo := mustDiscover(t, withFiles(t, "8em64t-2s2ca2c", nil))
	d := topo.Doc()
	for _, doc := range []Doc{{CPUs: d.CPUs, Isolated: "6-9"}, {CPUs: d.CPUs, NohzFull: "x"}} {
		if _, err := FromDoc(doc); !errors.Is(err, ErrInvalid) {
			t.Errorf("FromDoc(isolated %q, nohz_full %q): err %v, want ErrInvalid", doc.Isolated, doc.NohzFull, err)
		}
	}
}

// FuzzDiscoverIsolation feeds arbitrary content to the three isolation
// files of a real dump: discovery returns an error or a topology whose
// isolated CPUs are present CPUs and survive the JSON document.
func FuzzDiscoverIsolation(f *testing.F) {
	for i, s := range []string{"6-7\n", "(null)\n", "", "\n", "0-7\x00", "6-", "7-6", "0,", "99999999", "1-3,5,7-7\n", "-1"} {
		f.Add(uint8(i%3), s)
	}
	var base fstest.MapFS
	f.Fuzz(func(t *testing.T, which uint8, content string) {
		if base == nil {
			base = testutil.SysfsFromTarBz2(t, "8em64t-2s2ca2c")
		}
		m := cloneFS(base)
		name := []string{isolatedFile, nohzFullFile, partitionsFile}[int(which)%3]
		m[name] = &fstest.MapFile{Data: []byte(content)}
		topo, err := Discover(m)
		if err != nil {
			if !errors.Is(err, ErrBadSysfs) {
				t.Fatalf("error %v does not wrap ErrBadSysfs", err)
			}
			return
		}
		for _, set := range []cpuset.CPUSet{topo.Isolated(), topo.NohzFull()} {
			if !set.IsSubsetOf(topo.Present()) {
				t.Fatalf("isolated %s outside present %s", set, topo.Present())
			}
		}
		checkDocRoundTrip(t, topo)
	})
}

// TestVMDumpsIsolation reads the dumps of a real kernel booted with
// isolcpus=6,7 nohz_full=6,7 (test/e2evm's isolcpus machine, 6.12; see
// testdata/vm/*.note): as booted, and after CPUs 4-5 were made a cgroup v2
// isolated partition. The kernel lists the isolcpus CPUs in the root's
// cpuset.cpus.isolated even before any partition (read as isolcpus only,
// not as a partition), adds the partition's CPUs there and takes them out
// of the root's cpuset.cpus.effective (corepin, in the root, may not use
// them). Each dump reads as corepin read the live machine
// (the topo JSON printed there), and the text view names every source.
func TestVMDumpsIsolation(t *testing.T) {
	for _, tc := range []struct {
		dump                           string
		isolated, isolcpus, partitions string
		nohz, notAllowed, line         string
	}{
		{dump: "qemu-2s2c2t-isolcpus6-7", isolated: "6-7", isolcpus: "6-7", nohz: "6-7",
			line: "Isolated: 6-7 (isolcpus), nohz_full: 6-7"},
		{dump: "qemu-2s2c2t-isolcpus6-7-partition4-5", isolated: "4-7", isolcpus: "6-7", partitions: "4-5", nohz: "6-7", notAllowed: "4-5",
			line: "Isolated: 4-7 (isolcpus 6-7; cgroup isolated partition 4-5), nohz_full: 6-7"},
	} {
		t.Run(tc.dump, func(t *testing.T) {
			topo, err := Discover(testutil.VMDump(t, tc.dump))
			if err != nil {
				t.Fatal(err)
			}
			iso := topo.Isolation()
			for what, got := range map[string]cpuset.CPUSet{"Isolated()": topo.Isolated(), "Isolcpus": iso.Isolcpus,
				"Partitions": iso.Partitions, "NohzFull()": topo.NohzFull(), "not allowed": topo.Online().Difference(topo.Allowed())} {
				want := map[string]string{"Isolated()": tc.isolated, "Isolcpus": tc.isolcpus, "Partitions": tc.partitions,
					"NohzFull()": tc.nohz, "not allowed": tc.notAllowed}[what]
				if got.String() != want {
					t.Errorf("%s = %q, want %q", what, got, want)
				}
			}
			var text bytes.Buffer
			if err := topo.Render(&text, RenderOptions{}); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(text.String(), "\n"+tc.line+"\n") {
				t.Errorf("text view lacks the line %q:\n%s", tc.line, text.String())
			}
			live, err := os.ReadFile(filepath.Join(testutil.VMDumpsDir(), tc.dump+".topo.json"))
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.Marshal(topo.Doc())
			if err != nil {
				t.Fatal(err)
			}
			var a, b any
			if err := json.Unmarshal(live, &a); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(got, &b); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(a, b); d != "" {
				t.Errorf("the dump reads differently from the live machine (-live +dump):\n%s", d)
			}
		})
	}
}
