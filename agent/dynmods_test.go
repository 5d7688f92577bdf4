package agent

import (
	"strings"
	"testing"

	"github.com/corepin/corepin/enforce"
)

func TestDynModsNote(t *testing.T) {
	v1 := []enforce.Mount{
		{FSType: "tmpfs", Point: "/sys/fs/cgroup", SuperOptions: "rw,mode=755"},
		{FSType: "cgroup", Point: "/sys/fs/cgroup/cpuset", SuperOptions: "rw,cpuset"},
		{FSType: "cgroup", Point: "/sys/fs/cgroup/cpu", SuperOptions: "rw,cpu"},
	}
	withNamed := append(v1[:len(v1):len(v1)], enforce.Mount{FSType: "cgroup", Point: "/run/dynmods", SuperOptions: "rw,favordynmods,name=dynmods"})
	for _, tc := range []struct {
		name    string
		driver  string
		mounts  []enforce.Mount
		cmdline string
		note    bool
	}{
		{name: "v1 without favordynmods", driver: enforce.NameV1, mounts: v1, cmdline: "console=ttyS0 quiet", note: true},
		{name: "v1 with a hierarchy mounted favordynmods", driver: enforce.NameV1, mounts: withNamed, note: false},
		{name: "v1 booted cgroup_favordynmods=true", driver: enforce.NameV1, mounts: v1, cmdline: "quiet cgroup_favordynmods=true", note: false},
		{name: "v1 booted cgroup_favordynmods=y", driver: enforce.NameV1, mounts: v1, cmdline: "cgroup_favordynmods=y", note: false},
		{name: "v1 booted cgroup_favordynmods=0", driver: enforce.NameV1, mounts: v1, cmdline: "cgroup_favordynmods=0", note: true},
		{name: "a favordynmods option elsewhere", driver: enforce.NameV1, mounts: append(v1[:len(v1):len(v1)], enforce.Mount{FSType: "ext4", SuperOptions: "rw,favordynmods"}), note: true},
		{name: "v2 starts commands without moving a task", driver: enforce.NameV2, mounts: v1, note: false},
		{name: "affinity moves no task", driver: enforce.NameAffinity, mounts: v1, note: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := dynModsNote(tc.driver, tc.mounts, tc.cmdline)
			if (got != "") != tc.note {
				t.Fatalf("dynModsNote = %q, want a note: %v", got, tc.note)
			}
			if got != "" && !strings.Contains(got, "cgroup_favordynmods=true") {
				t.Errorf("dynModsNote = %q, want it to say how to avoid the wait", got)
			}
		})
	}
}

// FuzzDynModsNote: any kernel command line and super options give an
// answer without panicking, and a cgroup mount with favordynmods always
// silences the note.
func FuzzDynModsNote(f *testing.F) {
	f.Add("quiet cgroup_favordynmods=true", "rw,cpuset")
	f.Add("cgroup_favordynmods=", "rw,favordynmods")
	f.Add("cgroup_favordynmods", "")
	f.Fuzz(func(t *testing.T, cmdline, opts string) {
		mounts := []enforce.Mount{{FSType: "cgroup", SuperOptions: opts}}
		dynModsNote(enforce.NameV1, mounts, cmdline)
		with := append(mounts, enforce.Mount{FSType: "cgroup", SuperOptions: "rw,favordynmods,name=x"})
		if got := dynModsNote(enforce.NameV1, with, cmdline); got != "" {
			t.Fatalf("dynModsNote with a favordynmods hierarchy = %q, want none", got)
		}
	})
}
