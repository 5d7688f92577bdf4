package measure

import (
	"io/fs"
	"os"
	"os/exec"
	"sync"
	"testing"
	"testing/fstest"
	"time"
)

// swapFS is a procfs whose content the test replaces as a whole, as the
// kernel changes /proc between two sweeps.
type swapFS struct {
	mu sync.Mutex
	m  fstest.MapFS
}

func (s *swapFS) Open(name string) (fs.File, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m.Open(name)
}

func (s *swapFS) set(m fstest.MapFS) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m = m
}

// Job.Wait takes the last sweep while the exited job is still a zombie,
// then reaps it: reaping removes /proc/<pid>, so a sweep after it would
// lose what the job did since the sweep before (here the last 200 ns of
// run time and 3 migrations). The pid is no child of the test, so the wait
// for its exit returns at once; the sampler's interval is an hour, so only
// the first and the last sweep run.
func TestWaitSamplesBeforeReaping(t *testing.T) {
	const pid = 4194000
	job := func(run, mig int64) fstest.MapFS {
		return fakeFS(fakeProc{pid: pid, ppid: 1, start: 5, threads: []fakeThread{{tid: pid, cpu: 1, mig: mig, run: run, wait: 10}}})
	}
	proc := &swapFS{m: job(100, 1)}
	reaped := false
	reap := func() (*os.ProcessState, error) {
		proc.set(fstest.MapFS{}) // the kernel frees the task
		reaped = true
		return nil, nil
	}
	j, err := WatchPID(pid, reap, WithProcFS(proc), WithInterval(time.Hour), WithPressure(fstest.MapFS{}, "cpu.pressure"))
	if err != nil {
		t.Fatalf("WatchPID: %v", err)
	}
	proc.set(job(300, 4)) // the job ran on until it exited
	r, err := j.Wait()
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if !reaped {
		t.Fatal("Wait did not reap the job")
	}
	if r.RunTime != 300 || r.Migrations != 4 {
		t.Errorf("Wait = RunTime %d, Migrations %d; want 300 and 4, the sweep taken before the reap", r.RunTime, r.Migrations)
	}
}

// WithBefore: the "before" cpu.stat is the one read before the process
// started, not the file at Watch. A short job throttled between its start
// and Watch (here: 2 throttled periods already in the file) showed no
// throttling at all when Watch read the "before" itself (TestRunQuotaJSON
// on a loaded machine).
func TestWithBeforeCountsFromTheStart(t *testing.T) {
	stat := fstest.MapFS{"cpu.stat": {Data: []byte("nr_periods 5\nnr_throttled 2\nthrottled_time 3000000\n")}}
	for _, c := range []struct {
		name string
		opts []Option
		want int64
	}{
		{"read at Watch", nil, 0},
		{"given before the start", []Option{WithBefore(&CPUStat{}, nil)}, 2},
	} {
		cmd := exec.Command("true")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		j, err := Watch(cmd, append([]Option{WithCPUStat(stat, "cpu.stat")}, c.opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		r, err := j.Wait()
		if err != nil {
			t.Fatal(err)
		}
		if r.Throttle.ThrottledPeriods != c.want {
			t.Errorf("%s: %d throttled periods, want %d", c.name, r.Throttle.ThrottledPeriods, c.want)
		}
	}
}
