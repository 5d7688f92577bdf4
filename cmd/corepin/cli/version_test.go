package cli

import (
	"bytes"
	"encoding/json"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestVersionOf(t *testing.T) {
	vcs := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	for _, tc := range []struct {
		name                  string
		version, commit, date string
		bi                    *debug.BuildInfo
		want                  VersionInfo
	}{{
		name:    "make build: the linker's values win",
		version: "0.1.0", commit: "a26a50b0", date: "2026-11-27T06:50:00Z",
		bi:   &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: vcs("vcs.revision", "ffff", "vcs.time", "2020-01-01T00:00:00Z")},
		want: VersionInfo{Version: "0.1.0", Commit: "a26a50b0", Date: "2026-11-27T06:50:00Z", Go: "go1.26.8"},
	}, {
		name:    "go build in a checkout with changes",
		version: "dev",
		bi: &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261127065000-a26a50b01234+dirty"},
			Settings: vcs("vcs", "git", "vcs.revision", "a26a50b012345678", "vcs.time", "2026-11-27T06:50:00Z", "vcs.modified", "true")},
		want: VersionInfo{Version: "v0.0.0-20261127065000-a26a50b01234+dirty", Commit: "a26a50b012345678-dirty", Date: "2026-11-27T06:50:00Z", Go: "go1.26.8"},
	}, {
		name:    "go install module@commit: the pseudo-version's commit and time",
		version: "dev",
		bi:      &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.1.1-0.20261127065000-a26a50b01234"}},
		want:    VersionInfo{Version: "v0.1.1-0.20261127065000-a26a50b01234", Commit: "a26a50b01234", Date: "2026-11-27T06:50:00Z", Go: "go1.26.8"},
	}, {
		name:    "go install module@v0.1.0: no commit in the build info",
		version: "dev",
		bi:      &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.1.0"}},
		want:    VersionInfo{Version: "v0.1.0", Commit: "unknown", Date: "unknown", Go: "go1.26.8"},
	}, {
		name:    "go build -buildvcs=false",
		version: "dev",
		bi:      &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
		want:    VersionInfo{Version: "dev", Commit: "unknown", Date: "unknown", Go: "go1.26.8"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := versionOf(tc.version, tc.commit, tc.date, tc.bi)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("versionOf (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParsePseudoVersion(t *testing.T) {
	for _, tc := range []struct {
		in      string
		wantRev string
		wantOK  bool
	}{
		{in: "v0.0.0-20261127065000-a26a50b01234", wantRev: "a26a50b01234", wantOK: true},
		{in: "v1.2.3-pre.0.20261127065000-a26a50b01234", wantRev: "a26a50b01234", wantOK: true},
		{in: "v1.2.4-0.20261127065000-a26a50b01234+incompatible", wantRev: "a26a50b01234", wantOK: true},
		{in: "v0.1.0"},
		{in: "v0.1.0-rc.1"},
		{in: "(devel)"},
		{in: "v0.0.0-20261327065000-a26a50b01234"},  // month 13
		{in: "v0.0.0-20261127065000-A26A50B01234"},  // upper case
		{in: "v0.0.0-20261127065000-a26a50b0123"},   // short hash
		{in: "v0.0.0x20261127065000-a26a50b01234"},  // no separator
		{in: "v0.0.0-120261127065000-a26a50b01234"}, // time of 15 digits
	} {
		rev, _, ok := parsePseudoVersion(tc.in)
		if rev != tc.wantRev || ok != tc.wantOK {
			t.Errorf("parsePseudoVersion(%q) = %q, %v; want %q, %v", tc.in, rev, ok, tc.wantRev, tc.wantOK)
		}
	}
}

func FuzzParsePseudoVersion(f *testing.F) {
	for _, s := range []string{"v0.0.0-20261127065000-a26a50b01234", "v1.2.4-0.20261127065000-a26a50b01234+dirty", "v0.1.0", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		rev, tm, ok := parsePseudoVersion(s)
		if !ok {
			if rev != "" || !tm.IsZero() {
				t.Fatalf("parsePseudoVersion(%q) = %q, %v, false", s, rev, tm)
			}
			return
		}
		// What it returns is in the input, as the pseudo-version writes it.
		if len(rev) != 12 || !strings.Contains(s, tm.Format("20060102150405")+"-"+rev) {
			t.Fatalf("parsePseudoVersion(%q) = %q, %v: not the input's time and commit", s, rev, tm)
		}
	})
}

func TestVersionCommand(t *testing.T) {
	old := [3]string{Version, Commit, Date}
	t.Cleanup(func() { Version, Commit, Date = old[0], old[1], old[2] })
	Version, Commit, Date = "0.1.0", "a26a50b012345678", "2026-11-27T06:50:00Z"
	run := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if code := Main(args, nil, &out, &errb); code != 0 {
			t.Fatalf("corepin %v: exit %d: %s", args, code, errb.String())
		}
		return out.String()
	}
	js := run("version", "-o", "json")
	for _, args := range [][]string{{"--version", "-o", "json"}, {"-o", "json", "--version"}} {
		if got := run(args...); got != js {
			t.Errorf("corepin %v printed %q, corepin version -o json %q", args, got, js)
		}
	}
	var got VersionInfo
	if err := json.Unmarshal([]byte(js), &got); err != nil {
		t.Fatal(err)
	}
	want := VersionInfo{Version: "0.1.0", Commit: "a26a50b012345678", Date: "2026-11-27T06:50:00Z", Go: got.Go}
	if diff := cmp.Diff(want, got); diff != "" || !strings.HasPrefix(got.Go, "go") {
		t.Errorf("corepin version -o json (-want +got):\n%s", diff)
	}
	text := run("version")
	if flag := run("--version"); flag != text {
		t.Errorf("corepin --version printed %q, corepin version %q", flag, text)
	}
	for _, s := range []string{"corepin 0.1.0\n", "commit  a26a50b012345678\n", "date    2026-11-27T06:50:00Z\n"} {
		if !strings.Contains(text, s) {
			t.Errorf("corepin version printed %q, want a line %q", text, s)
		}
	}
	if _, err := time.Parse(time.RFC3339, got.Date); err != nil {
		t.Errorf("date %q is not RFC 3339: %v", got.Date, err)
	}
}
