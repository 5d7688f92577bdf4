package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corepin/corepin/nodecore"
)

// BenchmarkAdmission measures admission-to-pinned over the API: from the
// client sending POST /v1/workloads to the 201, which comes after the
// assignment is committed and the command runs in its group. Each
// iteration is one create and one delete. Run with -benchtime=1000x;
// it reports p50 and p99 of the create.
func BenchmarkAdmission(b *testing.B) {
	n, _ := newNode(b)
	cl := NewClient(serve(b, &Server{Node: n}), "")
	benchAdmissions(b, func(i int) Spec {
		return Spec{Name: "bench-" + strconv.Itoa(i%4), QoS: "LSE", CPUs: f64(1), Command: "sleep", Args: []string{"600"}}
	}, cl)
}

// BenchmarkAdmissionAdopt is BenchmarkAdmission for a running process
// (pid): the agent's own share of admission-to-pinned, without the
// fork and exec of a command.
func BenchmarkAdmissionAdopt(b *testing.B) {
	n, _ := newNode(b)
	cl := NewClient(serve(b, &Server{Node: n}), "")
	benchAdmissions(b, func(i int) Spec {
		p, err := os.StartProcess("/bin/sleep", []string{"sleep", "600"}, &os.ProcAttr{})
		if err != nil {
			b.Fatal(err)
		}
		go p.Wait()
		return Spec{Name: "adopt-" + strconv.Itoa(i%4), QoS: "LSE", CPUs: f64(1), PID: p.Pid}
	}, cl)
}

// benchAdmissions creates and deletes spec(i) b.N times and reports the
// p50, p99 and max of the create, as the client sees it.
func benchAdmissions(b *testing.B, spec func(i int) Spec, cl *Client) {
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		s := spec(i)
		b.StartTimer()
		t0 := time.Now()
		if _, err := cl.Create(s); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
		if err := cl.Delete(s.Name); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportLatency(b, lat)
}

// BenchmarkAdmission500 is issue 27's admission figure through the
// agent's core, without the HTTP API: 500 sequential 1-CPU creates of a
// command (sleep), each deleted before the next, of QoS LSE and of LS,
// on the real state file (SQLite, in a temporary directory) and the real
// cgroup driver (it skips without root or a cgroup mount). It reports p50
// and p99 of the create (Node.Create: admission committed, group made,
// command started in it). Run with -benchtime=1x; each iteration is 500
// creates. It also reports the p99 of each phase of the create
// (nodecore.Phases: commit, pools, group, start), each over all creates.
func BenchmarkAdmission500(b *testing.B) {
	for _, q := range []string{"LSE", "LS"} {
		b.Run(q, func(b *testing.B) {
			admissions(b, q, "adm-", 500, 0)
		})
	}
}

// admissions times count*b.N sequential 1-CPU creates of class q, each
// deleted before the next and each pause after the previous delete, and
// reports their latency and phases.
func admissions(b *testing.B, q, prefix string, count int, pause time.Duration) {
	phases := &phaseLog{}
	n, _ := newNode(b, func(o *Options) { o.Observer = phases })
	lat := make([]time.Duration, 0, count*b.N)
	for i := range count * b.N {
		if pause > 0 {
			time.Sleep(pause) // the benchmark's subject: a create after a quiet spell
		}
		s := Spec{Name: prefix + strconv.Itoa(i%4), QoS: q, CPUs: f64(1), Command: "sleep", Args: []string{"600"}}
		t0 := time.Now()
		if _, err := n.Create(s); err != nil {
			b.Fatalf("create %d: %v", i, err)
		}
		lat = append(lat, time.Since(t0))
		if err := n.Delete(s.Name); err != nil {
			b.Fatalf("delete %d: %v", i, err)
		}
	}
	reportLatency(b, lat)
	phases.report(b)
}

// BenchmarkAdmissionSparse is BenchmarkAdmission500's LSE create as it
// comes on a node between pauses: 100 creates, each 50 ms after the
// previous create's delete. Back to back, the creates mostly find the
// kernel's cgroup migration lock warm; after a pause, on cgroup v1, the
// first move of a task waits for an RCU grace period (see
// docs/reference/agent.md). It reports what BenchmarkAdmission500 does.
// Run with -benchtime=1x.
func BenchmarkAdmissionSparse(b *testing.B) {
	admissions(b, "LSE", "sparse-", 100, 50*time.Millisecond)
}

// phaseLog keeps the duration and the phases of every admission
// (nodecore.PhaseObserver); its nil *Metrics records nothing else.
type phaseLog struct {
	*Metrics
	total  []time.Duration
	phases []nodecore.Phases
}

func (l *phaseLog) Admitted(d time.Duration, _ error) { l.total = append(l.total, d) }
func (l *phaseLog) AdmissionPhases(p nodecore.Phases) { l.phases = append(l.phases, p) }

// report reports the p99 of each phase in milliseconds.
func (l *phaseLog) report(b *testing.B) {
	for _, ph := range []struct {
		name string
		of   func(nodecore.Phases) time.Duration
	}{
		{"commit", func(p nodecore.Phases) time.Duration { return p.Commit }},
		{"pools", func(p nodecore.Phases) time.Duration { return p.Pools }},
		{"group", func(p nodecore.Phases) time.Duration { return p.Group }},
		{"start", func(p nodecore.Phases) time.Duration { return p.Start }},
	} {
		xs := make([]time.Duration, 0, len(l.phases))
		for _, p := range l.phases {
			xs = append(xs, ph.of(p))
		}
		slices.Sort(xs)
		b.ReportMetric(float64(xs[len(xs)*99/100].Microseconds())/1000, "p99-"+ph.name+"-ms")
	}
}

// reportLatency reports p50, p99 and max of lat in milliseconds.
func reportLatency(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
}

// procCPU returns the CPU time of every thread of pid, summed from
// /proc/PID/task/*/schedstat (nanoseconds; /proc/PID/stat counts in 10 ms
// ticks, too coarse for an idle process). Threads that exited before the
// read are not counted, which can only lower the figure by what they used.
func procCPU(b *testing.B, pid int) time.Duration {
	ts, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(ts) == 0 {
		b.Fatalf("no threads of %d: %v", pid, err)
	}
	var sum time.Duration
	for _, f := range ts {
		raw, err := os.ReadFile(f)
		if err != nil {
			continue // the thread exited
		}
		ns, err := strconv.ParseInt(strings.Fields(string(raw))[0], 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		sum += time.Duration(ns)
	}
	return sum
}

// procRSS returns VmRSS of pid in bytes.
func procRSS(b *testing.B, pid int) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	b.Fatal("no VmRSS")
	return 0
}

// BenchmarkIdleAgent runs an agent as a real process holding 20
// workloads (reconciling every second, ten times the default rate), lets
// it idle, and reports its CPU use as a percentage of one CPU, read from
// /proc over COREPIN_IDLE_SECONDS (default 5). Run with -benchtime=1x.
func BenchmarkIdleAgent(b *testing.B) {
	requireCgroups(b)
	secs := soakInt("COREPIN_IDLE_SECONDS", 5)
	for range b.N {
		root := testRoot(b)
		dir := b.TempDir()
		c := startChild(b, filepath.Join(dir, "a.sock"), filepath.Join(dir, "state.db"), root)
		cl := NewClient(c.socket, "")
		for i := range 20 {
			if _, err := cl.Create(Spec{Name: fmt.Sprintf("idle-%d", i), CPUs: f64(0.05), Command: "sleep", Args: []string{"600"}}); err != nil {
				c.kill()
				b.Fatal(err)
			}
		}
		time.Sleep(time.Second) // settle
		pid := c.cmd.Process.Pid
		cpu0, t0 := procCPU(b, pid), time.Now()
		time.Sleep(time.Duration(secs) * time.Second)
		cpu1, t1 := procCPU(b, pid), time.Now()
		c.kill()
		b.ReportMetric(100*float64(cpu1-cpu0)/float64(t1.Sub(t0)), "%cpu-idle")
	}
}

// BenchmarkRSS500 admits 500 workloads (LS, each a sleep) to an agent
// running as a real process and reports its resident memory.
// Run with -benchtime=1x.
func BenchmarkRSS500(b *testing.B) {
	requireCgroups(b)
	for range b.N {
		root := testRoot(b)
		dir := b.TempDir()
		c := startChild(b, filepath.Join(dir, "a.sock"), filepath.Join(dir, "state.db"), root)
		cl := NewClient(c.socket, "")
		if _, err := cl.List(); err != nil {
			c.kill()
			b.Fatal(err)
		}
		b.ReportMetric(float64(procRSS(b, c.cmd.Process.Pid))/(1<<20), "MB-rss-empty")
		for i := range 500 {
			if _, err := cl.Create(Spec{Name: fmt.Sprintf("rss-%03d", i), QoS: "LS", CPUs: f64(0.002), Command: "sleep", Args: []string{"600"}}); err != nil {
				c.kill()
				b.Fatalf("workload %d: %v", i, err)
			}
		}
		ws, err := cl.List()
		if err != nil || len(ws) != 500 {
			c.kill()
			b.Fatalf("List = %d workloads, %v; want 500", len(ws), err)
		}
		if _, err := cl.Topology(); err != nil {
			c.kill()
			b.Fatal(err)
		}
		rss := procRSS(b, c.cmd.Process.Pid)
		c.kill()
		b.ReportMetric(float64(rss)/(1<<20), "MB-rss")
	}
}
