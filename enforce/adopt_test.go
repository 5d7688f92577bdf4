package enforce

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// StartThread: the child is born in the group, confined to its CPUs from
// its first instruction, and this process has no thread left in the group.
func TestStartThreadV1(t *testing.T) {
	d, _ := realV1(t)
	want := highestCPU(t)
	g, err := d.Create("st", Resources{CPUs: want})
	if err != nil {
		t.Fatal(err)
	}
	defer RemoveWhenEmpty(g, 0)
	for i := range 20 { // the thread must come back every time
		cmd := exec.Command("sh", "-c", "grep Cpus_allowed_list /proc/self/status; cat /proc/self/cgroup")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := StartThread(g, cmd); err != nil {
			t.Fatal(err)
		}
		pids, err := Pids(g)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(pids, os.Getpid()) {
			t.Fatalf("round %d: the test process is still in the group (pids %v)", i, pids)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("%v: %s", err, out.String())
		}
		if !strings.Contains(out.String(), "\t"+want.String()+"\n") || !strings.Contains(out.String(), dirName(d.self, "st")) {
			t.Fatalf("round %d: child output %q, want Cpus_allowed_list %s and group %s", i, out.String(), want, dirName(d.self, "st"))
		}
	}
}

// List finds the groups under the root with their processes and CPUs;
// Reopen gives a working group back; a directory that is not a corepin
// group is left out.
func TestListAndReopenV1(t *testing.T) {
	d, m := realV1(t)
	cpus := highestCPU(t)
	g, err := d.Create("lst", Resources{CPUs: cpus})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "60")
	if err := StartThread(g, cmd); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait(); RemoveWhenEmpty(g, 0) }()
	if err := os.Mkdir(m.CPUSet+"/"+d.base+"/not-ours", 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(m.CPUSet + "/" + d.base + "/not-ours")
	ls, err := d.List()
	if err != nil {
		t.Fatal(err)
	}
	want := []Listed{{Name: "lst", Dir: dirName(d.self, "lst"), OwnerPID: os.Getpid(), OwnerAlive: true, Pids: []int{cmd.Process.Pid}, CPUs: cpus}}
	if diff := cmp.Diff(want, ls, cmp.Comparer(func(a, b interface{ String() string }) bool { return a.String() == b.String() })); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	g2, err := d.Reopen(ls[0])
	if err != nil {
		t.Fatal(err)
	}
	if st, err := g2.Stats(); err != nil {
		t.Errorf("Stats of the reopened group: %v", err)
	} else if st.Usage < 0 {
		t.Errorf("Usage = %v", st.Usage)
	}
	if _, err := d.Reopen(Listed{Name: "lst", Dir: "../escape"}); err == nil {
		t.Error("Reopen of a directory that is not a corepin group succeeded")
	}
	if _, err := d.OpenExisting("../../etc"); err == nil {
		t.Error("OpenExisting of a path above the mount succeeded")
	}
}

// StartThread leaves the scheduler's hierarchy (cpu) to the child, which
// joins it once started: the child must end up in the group in every
// hierarchy, cpu included, whatever the kind of command, and one that has
// exited before it could be moved is no error.
func TestStartThreadJoinsEveryHierarchyV1(t *testing.T) {
	d, _ := realV1(t)
	g, err := d.Create("every", Resources{CPUs: highestCPU(t), Weight: 50})
	if err != nil {
		t.Fatal(err)
	}
	defer RemoveWhenEmpty(g, 0)
	cmd := exec.Command("sleep", "60")
	if err := StartThread(g, cmd); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	dir := dirName(d.self, "every")
	for _, c := range []string{"cpuset", "cpu", "cpuacct"} {
		var line string
		for l := range strings.Lines(string(raw)) {
			if f := strings.SplitN(strings.TrimSpace(l), ":", 3); len(f) == 3 && slices.Contains(strings.Split(f[1], ","), c) {
				line = f[2]
			}
		}
		if !strings.HasSuffix(line, "/"+dir) {
			t.Errorf("child's %s group is %q, want .../%s (/proc/PID/cgroup:\n%s)", c, line, dir, raw)
		}
	}
	for i := range 20 {
		quick := exec.Command("true")
		if err := StartThread(g, quick); err != nil {
			t.Fatalf("round %d: StartThread(true) = %v, want nil", i, err)
		}
		quick.Wait()
	}
}
