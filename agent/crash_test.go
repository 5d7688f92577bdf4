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
	deadline := time.Now().Add(20 * time.Second)
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
			t.Fatal("agent did not answer /healthz within 20s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (c *child) kill() {
	c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.done
}

// TestCrashRestart: 16 clients create and delete workloads (real sleep
// processes in real cgroups) while the agent is SIGKILLed at a random
// moment; after each restart the agent's state must equal the live groups
// and no CPU may be held by two exclusive workloads. make soak runs 20
// rounds (COREPIN_SOAK_ROUNDS).
func TestCrashRestart(t *testing.T) {
	requireCgroups(t)
	if testing.Short() {
		t.Skip("skipping the crash test in -short mode")
	}
	rounds := soakInt("COREPIN_SOAK_ROUNDS", 3)
	const clients, ops = 16, 200
	root := testRoot(t)
	dir := t.TempDir()
	socket, state := filepath.Join(dir, "agent.sock"), filepath.Join(dir, "state.db")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	t.Logf("seed-free random kills; %d rounds of %d ops by %d clients", rounds, ops, clients)
	var created, refused, failed atomic.Int64
	for round := range rounds {
		c := startChild(t, socket, state, root)
		cl := NewClient(socket, "")
		// The state the agent adopted must match the live groups.
		ws, err := cl.List()
		if err != nil {
			c.kill()
			t.Fatalf("round %d: listing after restart: %v", round, err)
		}
		checkConsistent(t, root, ws)
		if t.Failed() {
			c.kill()
			t.Fatalf("round %d: state and live groups disagree after restart", round)
		}
		var left atomic.Int64
		left.Store(ops)
		var wg sync.WaitGroup
		for i := range clients {
			seed := rng.Uint64()
			wg.Go(func() {
				r := rand.New(rand.NewPCG(seed, uint64(i)))
				for left.Add(-1) >= 0 {
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
				}
			})
		}
		// Kill at a random moment of the run (most runs take ~1s).
		time.Sleep(time.Duration(rng.IntN(1500)) * time.Millisecond)
		c.kill()
		wg.Wait()
	}
	// A last restart checks the final kill, then a graceful stop.
	c := startChild(t, socket, state, root)
	ws, err := NewClient(socket, "").List()
	if err != nil {
		c.kill()
		t.Fatal(err)
	}
	checkConsistent(t, root, ws)
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-c.done:
		if err != nil {
			t.Errorf("agent after SIGTERM: %v, want exit 0", err)
		}
	case <-time.After(30 * time.Second):
		c.kill()
		t.Error("agent did not stop within 30s of SIGTERM")
	}
	t.Logf("created %d, refused %d (409/404), cut off by kills %d; %d workloads at the end", created.Load(), refused.Load(), failed.Load(), len(ws))
	if created.Load() == 0 {
		t.Error("no create succeeded: the test exercised nothing")
	}
}
