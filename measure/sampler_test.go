package measure

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/corepin/corepin/cpuset"
)

// ignoreCost drops the fields that depend on the machine running the test.
var ignoreCost = cmpopts.IgnoreFields(Sample{}, "SamplerCPU", "Elapsed")

var cmpSets = cmp.Comparer(func(a, b cpuset.CPUSet) bool { return a.Equals(b) })

func TestSamplerEpycSnapshot(t *testing.T) {
	tests := []struct {
		name string
		root int
		want Sample
	}{
		{
			name: "shell-and-descendants",
			root: 6140,
			want: Sample{
				CPUsUsed: cpuset.New(0, 1), Migrations: 39, VoluntarySwitches: 392, InvoluntarySwitches: 225,
				RunTime: 1916956887, RunDelay: 285598168, Timeslices: 617, Threads: 6, Processes: 3, Samples: 1,
			},
		},
		{
			name: "go-program-only",
			root: 6142,
			want: Sample{
				CPUsUsed: cpuset.New(0, 1), Migrations: 39, VoluntarySwitches: 382, InvoluntarySwitches: 225,
				RunTime: 628589852 + 9874882 + 866924063 + 408187491, RunDelay: 54547823 + 72774440 + 51928280 + 106152472,
				Timeslices: 110 + 229 + 121 + 147, Threads: 4, Processes: 1, Samples: 1,
			},
		},
		{name: "gone", root: 99999, want: Sample{Samples: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSampler(os.DirFS(filepath.Join(epyc, "proc")), tc.root, 0)
			got, err := s.Stop()
			if err != nil {
				t.Fatalf("Stop: %v", err)
			}
			if diff := cmp.Diff(tc.want, got, ignoreCost, cmpSets); diff != "" {
				t.Errorf("Sample mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// fakeProc is a process to put into a fake procfs.
type fakeProc struct {
	pid, ppid int
	start     uint64
	threads   []fakeThread
}

type fakeThread struct {
	tid        int
	start      uint64 // default: the process's
	cpu        int
	mig        int64
	vol, invol int64
	run, wait  int64
	children   string // content of the children file; "" means no file
}

func (p fakeProc) add(m fstest.MapFS) {
	pid := strconv.Itoa(p.pid)
	m[pid+"/stat"] = &fstest.MapFile{Data: []byte(fakeStat(TaskStat{PID: p.pid, Comm: "p", State: 'S', PPID: p.ppid, NumThreads: len(p.threads), StartTime: p.start}))}
	for _, th := range p.threads {
		start := th.start
		if start == 0 {
			start = p.start
		}
		dir := pid + "/task/" + strconv.Itoa(th.tid) + "/"
		m[dir+"stat"] = &fstest.MapFile{Data: []byte(fakeStat(TaskStat{PID: th.tid, Comm: "t", State: 'R', PPID: p.ppid, StartTime: start, Processor: th.cpu}))}
		m[dir+"sched"] = &fstest.MapFile{Data: []byte("t (" + strconv.Itoa(th.tid) + ", #threads: 1)\n" + dashes +
			"\nse.nr_migrations : " + strconv.FormatInt(th.mig, 10) +
			"\nnr_switches : " + strconv.FormatInt(th.vol+th.invol, 10) +
			"\nnr_voluntary_switches : " + strconv.FormatInt(th.vol, 10) +
			"\nnr_involuntary_switches : " + strconv.FormatInt(th.invol, 10) + "\n")}
		m[dir+"schedstat"] = &fstest.MapFile{Data: []byte(strconv.FormatInt(th.run, 10) + " " + strconv.FormatInt(th.wait, 10) + " 1\n")}
		if th.children != "" {
			m[dir+"children"] = &fstest.MapFile{Data: []byte(th.children)}
		}
	}
}

func fakeFS(procs ...fakeProc) fstest.MapFS {
	m := fstest.MapFS{}
	for _, p := range procs {
		p.add(m)
	}
	return m
}

// sweeps runs one SampleOnce per file system state, swapping the state in
// between, and returns the final summary.
func sweeps(t *testing.T, root int, states ...fstest.MapFS) (Sample, error) {
	t.Helper()
	m := fstest.MapFS{}
	s := NewSampler(m, root, 0)
	for _, st := range states {
		clear(m)
		for k, v := range st {
			m[k] = v
		}
		_ = s.SampleOnce()
	}
	return s.Snapshot(), s.Err()
}

func TestSamplerSweeps(t *testing.T) {
	tests := []struct {
		name   string
		root   int
		states []fstest.MapFS
		want   Sample
	}{
		{
			// Thread 11 exits after the first sweep; its last values stay
			// in the sums.
			name: "keeps-exited-threads",
			root: 10,
			states: []fstest.MapFS{
				fakeFS(fakeProc{pid: 10, ppid: 1, start: 5, threads: []fakeThread{{tid: 10, cpu: 0, mig: 1, vol: 2, invol: 3, run: 100, wait: 10}, {tid: 11, cpu: 1, mig: 4, vol: 5, invol: 6, run: 200, wait: 20}}}),
				fakeFS(fakeProc{pid: 10, ppid: 1, start: 5, threads: []fakeThread{{tid: 10, cpu: 2, mig: 7, vol: 8, invol: 9, run: 300, wait: 30}}}),
			},
			want: Sample{CPUsUsed: cpuset.New(0, 1, 2), Migrations: 11, VoluntarySwitches: 13, InvoluntarySwitches: 15, RunTime: 500, RunDelay: 50, Timeslices: 2, Threads: 2, Processes: 1, Samples: 2},
		},
		{
			// TID 11 is reused by a thread started later: two threads.
			name: "tid-reuse",
			root: 10,
			states: []fstest.MapFS{
				fakeFS(fakeProc{pid: 10, ppid: 1, start: 5, threads: []fakeThread{{tid: 10}, {tid: 11, mig: 4}}}),
				fakeFS(fakeProc{pid: 10, ppid: 1, start: 5, threads: []fakeThread{{tid: 10}, {tid: 11, start: 9, mig: 1}}}),
			},
			want: Sample{CPUsUsed: cpuset.New(0), Migrations: 5, Timeslices: 3, Threads: 3, Processes: 1, Samples: 2},
		},
		{
			// The job exits and an unrelated process gets its pid.
			name: "pid-reuse",
			root: 10,
			states: []fstest.MapFS{
				fakeFS(fakeProc{pid: 10, ppid: 1, start: 5, threads: []fakeThread{{tid: 10, mig: 1}}}),
				fakeFS(fakeProc{pid: 10, ppid: 1, start: 50, threads: []fakeThread{{tid: 10, cpu: 3, mig: 100}}}),
			},
			want: Sample{CPUsUsed: cpuset.New(0), Migrations: 1, Timeslices: 1, Threads: 1, Processes: 1, Samples: 2},
		},
		{
			// The root exits; its child, re-parented to init, stays tracked.
			name: "orphan-kept",
			root: 10,
			states: []fstest.MapFS{
				fakeFS(fakeProc{pid: 10, ppid: 1, start: 5, threads: []fakeThread{{tid: 10, mig: 1}}},
					fakeProc{pid: 11, ppid: 10, start: 6, threads: []fakeThread{{tid: 11, mig: 2}}}),
				fakeFS(fakeProc{pid: 11, ppid: 1, start: 6, threads: []fakeThread{{tid: 11, cpu: 1, mig: 5}}}),
			},
			want: Sample{CPUsUsed: cpuset.New(0, 1), Migrations: 6, Timeslices: 2, Threads: 2, Processes: 2, Samples: 2},
		},
		{
			// 30 is a child of 10 and 20 a child of 30, all new at the
			// first sweep and listed in the order 10, 20, 30; 40 is not
			// in the tree.
			name: "grandchild-listed-first",
			root: 10,
			states: []fstest.MapFS{
				fakeFS(fakeProc{pid: 10, ppid: 1, start: 5, threads: []fakeThread{{tid: 10}}},
					fakeProc{pid: 20, ppid: 30, start: 7, threads: []fakeThread{{tid: 20, cpu: 2}}},
					fakeProc{pid: 30, ppid: 10, start: 6, threads: []fakeThread{{tid: 30, cpu: 1}, {tid: 31, cpu: 1}}},
					fakeProc{pid: 40, ppid: 1, start: 6, threads: []fakeThread{{tid: 40, cpu: 3, mig: 100}}}),
			},
			want: Sample{CPUsUsed: cpuset.New(0, 1, 2), Timeslices: 4, Threads: 4, Processes: 3, Samples: 1},
		},
		{
			// With children files (CONFIG_PROC_CHILDREN) those are used,
			// not ppid: 11's stat names init as its parent, 12 is found
			// through thread 13 of 11.
			name: "children-files",
			root: 10,
			states: []fstest.MapFS{
				fakeFS(fakeProc{pid: 10, ppid: 1, start: 5, threads: []fakeThread{{tid: 10, children: "11 \n"}}},
					fakeProc{pid: 11, ppid: 1, start: 6, threads: []fakeThread{{tid: 11, children: "\n", mig: 1}, {tid: 13, children: "12", mig: 2}}},
					fakeProc{pid: 12, ppid: 11, start: 7, threads: []fakeThread{{tid: 12, children: "\n", mig: 3}}},
					fakeProc{pid: 40, ppid: 10, start: 6, threads: []fakeThread{{tid: 40, mig: 100}}}),
			},
			want: Sample{CPUsUsed: cpuset.New(0), Migrations: 6, Timeslices: 4, Threads: 4, Processes: 3, Samples: 1},
		},
		{
			name:   "root-never-seen",
			root:   10,
			states: []fstest.MapFS{{}, {}},
			want:   Sample{Samples: 2},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := sweeps(t, tc.root, tc.states...)
			if err != nil {
				t.Fatalf("sweeps: %v", err)
			}
			if diff := cmp.Diff(tc.want, got, ignoreCost, cmpSets); diff != "" {
				t.Errorf("Sample mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// A malformed file is an error, but the rest of the sweep is still read.
func TestSamplerBadFile(t *testing.T) {
	m := fakeFS(fakeProc{pid: 10, ppid: 1, start: 5, threads: []fakeThread{{tid: 10, mig: 1}, {tid: 11, mig: 2}}})
	m["10/task/11/sched"] = &fstest.MapFile{Data: []byte("garbage")}
	s := NewSampler(m, 10, 0)
	if err := s.SampleOnce(); !errors.Is(err, errFormat) {
		t.Errorf("SampleOnce error = %v, want a format error", err)
	}
	got, err := s.Stop()
	if !errors.Is(err, errFormat) {
		t.Errorf("Stop error = %v, want the first sweep's format error", err)
	}
	if got.Migrations != 1 || got.Threads != 2 || got.Samples != 2 {
		t.Errorf("Stop = %+v, want Migrations 1, Threads 2, Samples 2", got)
	}
}
