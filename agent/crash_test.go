package agent

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/corepin/corepin/internal/testutil"
)

// soakInt reads a count from the environment (make soak raises them).
func soakInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// child is an agent running as a real process: this test binary re-executed
// with childEnv.
type child struct {
	cmd    *exec.Cmd
	socket string
	done   chan error
}

func startChild(t testing.TB, socket, state, root string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+socket+" "+state+" "+root)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, socket: socket, done: make(chan error, 1)}
	go func() { c.done <- cmd.Wait() }()
	cl := NewClient(socket, "")
	deadline := time.Now().Add(testutil.Patience)
	for {
		if cl.Healthy() == nil {
			return c
		}
		select {
		case err := <-c.done:
			t.Fatalf("agent exited at start: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("agent did not answer /healthz within %v", testutil.Patience)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (c *child) kill() {
	c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.done
}

// vanish stops the processes of the live group dir under root in every
// hierarchy, as when a workload exits while the agent is down, and with
// rmdir also removes the group.
func vanish(t testing.TB, root, dir string, rmdir bool) {
	t.Helper()
	testutil.Eventually(t, "the killed processes leave "+dir, func() bool {
		pids := readPids(filepath.Join(cpusetMount(), root, dir))
		for _, p := range pids {
			syscall.Kill(p, syscall.SIGKILL)
		}
		return len(pids) == 0
	})
	if !rmdir {
		return
	}
	ds, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", root, dir))
	for _, d := range ds {
		rmdirWhenEmpty(t, d)
	}
}

// TestCrashRestart: 16 clients create and delete workloads (real sleep
// processes in real cgroups) while the agent is SIGKILLed after a random
// count of the round's operations, with the rest still to come; while it
// is down some workloads exit, some with their groups removed. After each
// restart the agent's state must equal the live groups (no kept
// assignment of a vanished group, no group without one) and no CPU may be
// held by two exclusive workloads. make soak runs 20 rounds
// (COREPIN_SOAK_ROUNDS).
func TestCrashRestart(t *testing.T) {
	requireCgroups(t)
	if testing.Short() {
		t.Skip("skipping the crash test in -short mode")
	}
	rounds := soakInt("COREPIN_SOAK_ROUNDS", 6)
	const clients, ops = 16, 200
	root := testRoot(t)
	dir := t.TempDir()
	socket, state := filepath.Join(dir, "agent.sock"), filepath.Join(dir, "state.db")
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 7))
	t.Logf("seed %d; %d rounds of %d ops by %d clients", seed, rounds, ops, clients)
	var created, refused, failed, vanished atomic.Int64
	check := func(round int, c *child) []Workload {
		t.Helper()
		ws, err := NewClient(socket, "").List()
		if err != nil {
			c.kill()
			t.Fatalf("round %d: listing after restart: %v", round, err)
		}
		checkConsistent(t, root, ws)
		checkStored(t, state, ws)
		if t.Failed() {
			c.kill()
			t.Fatalf("round %d: state and live groups disagree after restart", round)
		}
		return ws
	}
	for round := range rounds {
		c := startChild(t, socket, state, root)
		cl := NewClient(socket, "")
		// The state the agent adopted must match the live groups.
		check(round, c)
		killAt := 1 + rng.IntN(ops-1) // operations done when the kill comes
		var started, done atomic.Int64
		var doneAtKill int64
		var once sync.Once
		var wg sync.WaitGroup
		for i := range clients {
			seed := rng.Uint64()
			wg.Go(func() {
				r := rand.New(rand.NewPCG(seed, uint64(i)))
				for started.Add(1) <= ops {
					name := fmt.Sprintf("w%02d", r.IntN(24))
					var err error
					if r.IntN(2) == 0 {
						s := Spec{Name: name, Command: "sleep", Args: []string{"600"}}
						switch r.IntN(3) {
						case 0:
							s.QoS, s.CPUs = "LSE", f64(1)
						case 1:
							s.QoS, s.CPUs = "LS", f64(float64(1+r.IntN(4))/10)
						default:
							s.QoS, s.CPUs = "BE", f64(0.1)
						}
						_, err = cl.Create(s)
						if err == nil {
							created.Add(1)
						}
					} else {
						err = cl.Delete(name)
					}
					switch {
					case err == nil:
					case IsUnreachable(err):
						failed.Add(1)
						return // the agent was killed
					default:
						refused.Add(1)
					}
					if done.Add(1) == int64(killAt) {
						once.Do(func() {
							doneAtKill = done.Load()
							c.kill()
						})
					}
				}
			})
		}
		wg.Wait()
		once.Do(func() { c.kill() }) // every client was cut off before killAt
		if doneAtKill == 0 || doneAtKill >= ops {
			t.Errorf("round %d: the kill came after %d of %d operations, want it inside them", round, doneAtKill, ops)
		}
		// While the agent is down, some workloads exit; some of their
		// groups go too (removed by hand, as by an operator).
		live := liveGroups(t, root)
		ds, _ := filepath.Glob(filepath.Join(cpusetMount(), root, "run-*"))
		gone := 0
		for i, d := range ds {
			if rng.IntN(4) == 0 || (i == len(ds)-1 && gone == 0) { // at least one
				vanish(t, root, filepath.Base(d), rng.IntN(2) == 0)
				vanished.Add(1)
				gone++
			}
		}
		t.Logf("round %d: killed after %d of %d operations; %d live workloads, %d vanished so far", round, doneAtKill, ops, len(live), vanished.Load())
	}
	// A last restart checks the final kill, then a graceful stop.
	c := startChild(t, socket, state, root)
	ws := check(rounds, c)
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-c.done:
		if err != nil {
			t.Errorf("agent after SIGTERM: %v, want exit 0", err)
		}
	case <-time.After(testutil.Patience):
		c.kill()
		t.Errorf("agent did not stop within %v of SIGTERM", testutil.Patience)
	}
	t.Logf("created %d, refused %d (409/404), cut off by kills %d, vanished %d; %d workloads at the end",
		created.Load(), refused.Load(), failed.Load(), vanished.Load(), len(ws))
	if created.Load() == 0 {
		t.Error("no create succeeded: the test exercised nothing")
	}
	if failed.Load() < int64(rounds) {
		t.Errorf("%d requests cut off by %d kills: the kills did not land among the operations", failed.Load(), rounds)
	}
}
