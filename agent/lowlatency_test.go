package agent

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corepin/corepin/enforce"
)

// load_balance and cpu_quota false are for LSE and LSR workloads, and
// load_balance false not for an adopted cgroup: refused as written (422),
// nothing admitted.
func TestSpecLowLatencyRefused(t *testing.T) {
	for _, tc := range []struct {
		body string
		want string // "" accepted
	}{
		{body: `{"name":"w","qos":"LSE","cpus":2,"command":"sleep","load_balance":false,"cpu_quota":false}`},
		{body: `{"name":"w","qos":"LSR","cpus":2,"command":"sleep","load_balance":false}`},
		{body: `{"name":"w","qos":"LS","cpus":2,"command":"sleep","load_balance":true,"cpu_quota":true}`},
		{body: `{"name":"w","qos":"LS","cpus":2,"command":"sleep","load_balance":false}`, want: `load_balance false takes CPUs of the workload's own out of the scheduler's balancing: qos LS shares its CPUs; use "qos": "LSE" or "LSR"`},
		{body: `{"name":"w","qos":"BE","cpus":1,"command":"sleep","cpu_quota":false}`, want: "cpu_quota false applies to an LSE or LSR workload's group: qos BE"},
		{body: `{"name":"w","qos":"LSE","cpus":1,"cgroup":"kubepods/pod1/c1","load_balance":false}`, want: "load_balance false applies to a command the agent starts or a pid it adopts"},
		{body: `{"name":"w","qos":"LSE","cpus":1,"command":"sleep","load_balance":"no"}`, want: "load_balance"},
	} {
		_, err := DecodeSpec(strings.NewReader(tc.body))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("DecodeSpec(%s) = %v, want accepted", tc.body, err)
		case tc.want != "" && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("DecodeSpec(%s) = %v, want %v saying %q", tc.body, err, ErrInvalid, tc.want)
		}
	}
}

// On this machine (cgroup v1, whose cpuset root balances every CPU) a
// workload asking for load_balance false is refused with the layout's
// reason, and nothing of it is admitted; cpu_quota false is kept in the
// state file and shown again by an agent opened after it.
func TestAgentLowLatencyThroughNode(t *testing.T) {
	requireCgroups(t)
	root, state := testRoot(t), filepath.Join(t.TempDir(), "state.db")
	n, err := openNode(t, root, state)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile("/sys/fs/cgroup/cpuset/cpuset.sched_load_balance"); err == nil && strings.TrimSpace(string(b)) == "1" {
		_, err := n.Create(Spec{Name: "lat", QoS: "LSE", CPUs: f64(1), Command: "sleep", Args: []string{"600"}, LoadBalance: new(false)})
		const want = "(the hierarchy's root) has cpuset.sched_load_balance 1"
		if !errors.Is(err, enforce.ErrLoadBalance) || !strings.Contains(err.Error(), want) {
			t.Errorf("Create(load_balance false) = %v, want %v saying %q", err, enforce.ErrLoadBalance, want)
		}
		if _, err := n.Get("lat"); err == nil {
			t.Errorf("the refused workload is admitted: %v", n.List())
		}
	} else {
		t.Log("no cgroup v1 cpuset root balancing every CPU here: the refusal is not checked")
	}
	w, err := n.Create(Spec{Name: "web", QoS: "LSE", CPUs: f64(1), Command: "sleep", Args: []string{"600"}, CPUQuota: new(false)})
	if err != nil {
		t.Fatal(err)
	}
	if w.CPUQuota == nil || *w.CPUQuota || w.LoadBalance != nil {
		t.Errorf("the created workload shows cpu_quota %v, load_balance %v; want false and absent", w.CPUQuota, w.LoadBalance)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n, err = openNode(t, root, state)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	w, err = n.Get("web")
	if err != nil {
		t.Fatal(err)
	}
	if w.CPUQuota == nil || *w.CPUQuota {
		t.Errorf("after a restart web shows cpu_quota %v, want false (kept in the state file)", w.CPUQuota)
	}
	if err := n.Delete("web"); err != nil {
		t.Fatal(err)
	}
}
