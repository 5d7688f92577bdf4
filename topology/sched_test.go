package topology

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

func ptr[T any](v T) *T { return &v }

func TestReadScheduler(t *testing.T) {
	const feats = "GENTLE_FAIR_SLEEPERS START_DEBIT NO_NEXT_BUDDY SIS_UTIL WARN_DOUBLE_CLOCK\n"
	tests := []struct {
		name  string
		files map[string]string
		want  Scheduler
		note  string // a substring of the one note, "" for none
	}{
		{
			name: "nothing readable",
			want: Scheduler{Kernel: ptr("6.18.4"), InertRoutes: []string{}},
		},
		{
			name:  "SIS_UTIL on, sched_ext disabled",
			files: map[string]string{schedFeaturesFile: feats, schedExtStateFile: "disabled\n"},
			want: Scheduler{Kernel: ptr("6.18.4"), FeaturesReadable: true, SISUtil: ptr(true),
				SchedExt: SchedExt{State: ptr("disabled"), Ops: ptr("")}, InertRoutes: []string{}},
		},
		{
			name:  "SIS_UTIL off",
			files: map[string]string{schedFeaturesFile: strings.Replace(feats, "SIS_UTIL", "NO_SIS_UTIL", 1)},
			want:  Scheduler{Kernel: ptr("6.18.4"), FeaturesReadable: true, SISUtil: ptr(false), InertRoutes: []string{}},
		},
		{
			name:  "a kernel before SIS_UTIL",
			files: map[string]string{schedFeaturesFile: "SIS_PROP NO_NEXT_BUDDY\n"},
			want:  Scheduler{Kernel: ptr("6.18.4"), FeaturesReadable: true, InertRoutes: []string{}},
		},
		{
			name:  "scx_layered attached: the group routes are inert",
			files: map[string]string{schedExtStateFile: "enabled\n", schedExtOpsFile: "layered\n"},
			want: Scheduler{Kernel: ptr("6.18.4"), SchedExt: SchedExt{State: ptr("enabled"), Ops: ptr("layered")},
				InertRoutes: []string{RouteCPUIdle, RouteIdleParent, RouteWeight}},
		},
		{
			name:  "features garbled",
			files: map[string]string{schedFeaturesFile: "SIS_UTIL lower\n"},
			want:  Scheduler{Kernel: ptr("6.18.4"), InertRoutes: []string{}},
			note:  `token "lower"`,
		},
		{
			name:  "sched_ext state not a word",
			files: map[string]string{schedExtStateFile: "en abled\n"},
			want:  Scheduler{Kernel: ptr("6.18.4"), InertRoutes: []string{}},
			note:  "not one printable word",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := fstest.MapFS{}
			for k, v := range tc.files {
				m[k] = &fstest.MapFile{Data: []byte(v)}
			}
			got := ReadScheduler(m, ptr("6.18.4"))
			notes := got.Notes
			got.Notes = nil
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("ReadScheduler() (-want +got):\n%s", d)
			}
			switch {
			case tc.note == "" && len(notes) > 0:
				t.Errorf("notes = %q, want none", notes)
			case tc.note != "" && (len(notes) != 1 || !strings.Contains(notes[0], tc.note)):
				t.Errorf("notes = %q, want one containing %q", notes, tc.note)
			}
		})
	}
}

func TestParseFeaturesErrors(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"empty", " \n", "no features"},
		{"lower case", "SIS_UTIL sis_prop", `token "sis_prop"`},
		{"bare NO_", "NO_", `token "NO_"`},
		{"twice", "SIS_UTIL NO_SIS_UTIL", "SIS_UTIL named twice"},
		{"too many", strings.Repeat("A ", MaxFeatures+1), "over 256"},
		{"long token", strings.Repeat("A", 65), "token"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseFeatures([]byte(tc.in))
			if !errors.Is(err, ErrBadFeatures) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseFeatures(%.20q) = %v, want an ErrBadFeatures naming %q", tc.in, err, tc.want)
			}
		})
	}
}

// TestOpenSchedulerRoot reads a root on disk: the features file is
// readable and writable there, and a FIFO in place of the sched_ext state
// is refused (never read, never hangs) with a note.
func TestOpenSchedulerRoot(t *testing.T) {
	root := t.TempDir()
	write := func(name, data string) {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(schedFeaturesFile, "NO_SIS_UTIL\n")
	write(osReleaseFile, "6.1.0-28-amd64\n")
	if err := os.MkdirAll(filepath.Join(root, "sys/kernel/sched_ext"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(root, schedExtStateFile), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := OpenScheduler(root)
	if err != nil {
		t.Fatal(err)
	}
	if s.Kernel == nil || *s.Kernel != "6.1.0-28-amd64" || !s.FeaturesReadable || s.SISUtil == nil || *s.SISUtil {
		t.Errorf("OpenScheduler() = %+v, want kernel 6.1.0-28-amd64, features readable, SIS_UTIL off", s)
	}
	if !s.FeaturesWritable {
		t.Errorf("features_writable = false for a file this user owns")
	}
	if s.SchedExt.State != nil || len(s.Notes) != 1 || !strings.Contains(s.Notes[0], "not a regular file") {
		t.Errorf("sched_ext state = %v, notes %q: want unknown and a note that the FIFO is not a regular file", s.SchedExt.State, s.Notes)
	}
	var b bytes.Buffer
	if err := RenderScheduler(&b, s, nil); err != nil || !strings.Contains(b.String(), "SIS_UTIL off") {
		t.Errorf("RenderScheduler() = %q, %v: want SIS_UTIL off", b.String(), err)
	}
}

func FuzzParseFeatures(f *testing.F) {
	f.Add([]byte("GENTLE_FAIR_SLEEPERS START_DEBIT NO_NEXT_BUDDY SIS_UTIL\n"))
	f.Add([]byte("NO_SIS_UTIL"))
	f.Add([]byte(""))
	f.Add([]byte("NO_NO_X X"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseFeatures(data)
		if err != nil {
			if !errors.Is(err, ErrBadFeatures) {
				t.Fatalf("error %v does not wrap ErrBadFeatures", err)
			}
			return
		}
		if len(m) == 0 || len(m) > MaxFeatures {
			t.Fatalf("%d features from a successful parse", len(m))
		}
		// Writing the map back as the kernel does parses to the same map.
		var b strings.Builder
		for k, on := range m {
			if !on {
				b.WriteString("NO_")
			}
			b.WriteString(k + " ")
		}
		m2, err := ParseFeatures([]byte(b.String()))
		if err != nil || !cmp.Equal(m, m2) {
			t.Fatalf("re-parsing %q = %v, %v; want %v", b.String(), m2, err, m)
		}
	})
}
