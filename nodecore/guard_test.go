package nodecore

import (
	"errors"
	"strings"
	"testing"
)

// A cgroup another workload adopted can not be adopted again, nor a
// cgroup inside it, nor one holding it: its parent or any ancestor would
// move the adopted workload's processes under a second set of limits
// (issue 27 §2.2). A sibling or a cgroup that only shares a name prefix is
// free.
func TestCheckCgroupRefusesWhatOverlapsAnAdoptedCgroup(t *testing.T) {
	const box = "/cpt-guard-test/team/box"
	g := Guard{Root: DefaultCgroupRoot, Adopted: map[string]string{"box": box}}
	tests := []struct {
		name, cgroup string
		taken        bool
	}{
		{name: "the adopted cgroup", cgroup: box, taken: true},
		{name: "the adopted cgroup, unclean", cgroup: "cpt-guard-test//team/./box/", taken: true},
		{name: "below it", cgroup: box + "/inner", taken: true},
		{name: "its parent", cgroup: "/cpt-guard-test/team", taken: true},
		{name: "its grandparent", cgroup: "/cpt-guard-test", taken: true},
		{name: "its parent, as ../ of a sibling", cgroup: "/cpt-guard-test/team/other/..", taken: true},
		{name: "a sibling", cgroup: "/cpt-guard-test/team/other"},
		{name: "a name prefix, not a parent", cgroup: "/cpt-guard-test/team/bo"},
		{name: "a name extension, not a child", cgroup: box + "x"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := g.CheckCgroup("new", tc.cgroup)
			if tc.taken {
				if !errors.Is(err, ErrTaken) || !strings.Contains(err.Error(), `adopted by workload "box"`) {
					t.Errorf("CheckCgroup(%q) = %v, want ErrTaken naming box", tc.cgroup, err)
				}
				return
			}
			if err != nil {
				t.Errorf("CheckCgroup(%q) = %v, want nil", tc.cgroup, err)
			}
		})
	}
}
