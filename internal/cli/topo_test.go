package cli

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"

	"github.com/corepin/corepin/internal/testutil"
)

// smallDump writes a two-CPU machine's sysfs into a temporary directory.
func smallDump(t *testing.T) string {
	t.Helper()
	m := fstest.MapFS{}
	for p, c := range map[string]string{
		"sys/devices/system/cpu/online":                             "0-1\n",
		"sys/devices/system/cpu/cpu0/topology/thread_siblings_list": "0\n",
		"sys/devices/system/cpu/cpu0/topology/core_siblings_list":   "0-1\n",
		"sys/devices/system/cpu/cpu1/topology/thread_siblings_list": "1\n",
		"sys/devices/system/cpu/cpu1/topology/core_siblings_list":   "0-1\n",
		"sys/devices/system/node/node0/cpulist":                     "0-1\n",
		"sys/devices/system/node/node0/distance":                    "10\n",
		"sys/devices/system/cpu/cpu0/cache/index3/level":            "3\n",
		"sys/devices/system/cpu/cpu0/cache/index3/shared_cpu_list":  "0-1\n",
		"sys/devices/system/cpu/cpu1/cache/index3/level":            "3\n",
		"sys/devices/system/cpu/cpu1/cache/index3/shared_cpu_list":  "0-1\n",
	} {
		m[p] = &fstest.MapFile{Data: []byte(c)}
	}
	return testutil.WriteDir(t, m)
}

// A hostile --sysfs-root (issue 8 §3) is bad input: exit 2 at once with one
// line that quotes nothing from outside the root, for topo, plan and
// simulate alike.
func TestTopoHostileSysfsRoot(t *testing.T) {
	const online = "sys/devices/system/cpu/online"
	const secret = "TOPSECRET-do-not-print"
	tests := []struct {
		name  string
		setup func(t *testing.T, root string)
		want  string
	}{
		{
			name: "fifo",
			setup: func(t *testing.T, root string) {
				if err := syscall.Mkfifo(filepath.Join(root, online), 0o644); err != nil {
					t.Skipf("mkfifo: %v", err)
				}
			},
			want: "not a regular file: a named pipe",
		},
		{
			name:  "link to /dev/zero",
			setup: func(t *testing.T, root string) { replaceWithLink(t, "/dev/zero", filepath.Join(root, online)) },
			want:  "escapes",
		},
		{
			name: "huge file",
			setup: func(t *testing.T, root string) {
				if err := os.WriteFile(filepath.Join(root, online), []byte(strings.Repeat("0,", 1<<20)), 0o644); err != nil {
					t.Fatal(err)
				}
			},
			want: "larger than the cap",
		},
		{
			name: "link to a secret outside the root",
			setup: func(t *testing.T, root string) {
				p := filepath.Join(t.TempDir(), "secret")
				if err := os.WriteFile(p, []byte(secret), 0o600); err != nil {
					t.Fatal(err)
				}
				replaceWithLink(t, p, filepath.Join(root, online))
			},
			want: "escapes",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := smallDump(t)
			tc.setup(t, root)
			for _, args := range []struct {
				stdin string
				argv  []string
			}{
				{argv: []string{"topo", "--sysfs-root", root}},
				{stdin: `{"topology": {"sysfs_root": "` + root + `"}, "requests": [{"id": "a", "cpus": 1}]}`, argv: []string{"plan"}},
				{argv: []string{"simulate", "--gen", "farm", "--jobs", "5", "--nodes", "1", "--sysfs-root", root}},
			} {
				code, _, errs := runMain(t, args.stdin, args.argv...)
				if code != 2 {
					t.Errorf("%s: exit %d, want 2 (stderr %q)", args.argv[0], code, errs)
				}
				if !strings.Contains(errs, tc.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
					t.Errorf("%s: stderr %q, want one line containing %q", args.argv[0], errs, tc.want)
				}
				if strings.Contains(errs, "do-not-print") {
					t.Errorf("%s: stderr quotes the secret: %q", args.argv[0], errs)
				}
			}
		})
	}
}

func replaceWithLink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}
