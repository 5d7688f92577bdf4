package agent

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/nodecore"
)

// Small sizes: real-time shares of other packages' tests, run at the same
// time, come from the same 95% of each CPU.
//
// The LS real-time route through the agent: an LS command it starts with
// sched rr runs in SCHED_RR, and so does a process it adopts by pid with
// sched fifo (every thread); the class is refused on any other QoS, on an
// adopted cgroup and under an unknown name, and nothing is admitted.
func TestAgentSchedRealTime(t *testing.T) {
	if err := enforce.CheckRealTime(enforce.RealTime{Policy: enforce.RTRR}); err != nil {
		t.Skipf("skipping: %v", err)
	}
	n, _ := newNode(t)
	if _, err := n.Create(Spec{Name: "svc", QoS: "LS", CPUs: f64(0.2), Command: "sleep", Args: []string{"600"}, Sched: "rr"}); err != nil {
		t.Fatalf("Create(svc, sched rr) = %v", err)
	}
	pids, err := enforce.Pids(groupOf(t, n, "svc"))
	if err != nil || len(pids) != 1 {
		t.Fatalf("Pids(svc) = %v, %v; want one process", pids, err)
	}
	if c, err := enforce.TaskClass(pids[0]); c != enforce.RTRR {
		t.Errorf("the started LS command runs in %q (%v), want rr", c, err)
	}

	adopt := exec.Command("sleep", "600")
	if err := adopt.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { adopt.Process.Kill(); adopt.Wait() })
	if _, err := n.Create(Spec{Name: "adopted", QoS: "LS", CPUs: f64(0.1), PID: adopt.Process.Pid, Sched: "fifo"}); err != nil {
		t.Fatalf("Create(adopted, sched fifo) = %v", err)
	}
	if c, err := enforce.TaskClass(adopt.Process.Pid); c != enforce.RTFIFO {
		t.Errorf("the adopted process runs in %q (%v), want fifo", c, err)
	}

	before := len(n.List())
	for _, c := range []struct {
		spec Spec
		msg  string
	}{
		{Spec{Name: "be", QoS: "BE", CPUs: f64(1), Command: "true", Sched: "rr"}, "sched rr is the real-time route of LS work"},
		{Spec{Name: "lse", QoS: "LSE", CPUs: f64(1), Command: "true", Sched: "fifo"}, `qos "LSE": use "qos": "LS"`},
		{Spec{Name: "cg", QoS: "LS", CPUs: f64(1), Cgroup: "some/pod", Sched: "rr"}, "a container's class is its runtime's to set"},
		{Spec{Name: "dl", QoS: "LS", CPUs: f64(1), Command: "true", Sched: "deadline"}, `sched "deadline": use normal, rr or fifo`},
	} {
		_, err := n.Create(c.spec)
		if !errors.Is(err, nodecore.ErrInvalid) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("Create(%s) = %v, want ErrInvalid saying %q", c.spec.Name, err, c.msg)
		}
	}
	if after := len(n.List()); after != before {
		t.Errorf("refused requests changed the list: %d workloads, was %d", after, before)
	}
}
