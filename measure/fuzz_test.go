package measure

import (
	"io/fs"
	"os"
	"path"
	"strconv"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

// addSeeds adds every file named base under the captured machine snapshot
// to the corpus, so fuzzing starts from real kernel output.
func addSeeds(f *testing.F, base ...string) {
	f.Helper()
	want := map[string]bool{}
	for _, b := range base {
		want[b] = true
	}
	n := 0
	err := fs.WalkDir(os.DirFS(epyc), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !want[path.Base(p)] {
			return err
		}
		b, err := os.ReadFile(epyc + "/" + p)
		if err != nil {
			return err
		}
		f.Add(b)
		n++
		return nil
	})
	if err != nil || n == 0 {
		f.Fatalf("seeding from %s: %d files, %v", epyc, n, err)
	}
}

// FuzzParseTaskStat checks that ParseTaskStat never panics, keeps the
// processor in range, and reads back what fakeStat writes from its result.
func FuzzParseTaskStat(f *testing.F) {
	addSeeds(f, "stat")
	f.Add([]byte("1 () R 0 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0"))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := ParseTaskStat(data)
		if err != nil {
			return
		}
		if st.Processor < 0 || st.Processor > 65535 || st.PID < 0 || st.PPID < 0 || st.NumThreads < 0 {
			t.Fatalf("ParseTaskStat(%q) = %+v: field out of range", data, st)
		}
		again, err := ParseTaskStat([]byte(fakeStat(st)))
		if err != nil {
			t.Fatalf("reparsing %+v: %v", st, err)
		}
		if diff := cmp.Diff(st, again); diff != "" {
			t.Fatalf("round trip of %q (-first +second):\n%s", data, diff)
		}
	})
}

func formatSched(ts TaskSched) string {
	return "x (1, #threads: 1)\n" + dashes +
		"\nse.nr_migrations : " + strconv.FormatInt(ts.Migrations, 10) +
		"\nnr_switches : " + strconv.FormatInt(ts.Switches, 10) +
		"\nnr_voluntary_switches : " + strconv.FormatInt(ts.VoluntarySwitches, 10) +
		"\nnr_involuntary_switches : " + strconv.FormatInt(ts.InvoluntarySwitches, 10) + "\n"
}

// FuzzParseTaskSched checks that ParseTaskSched never panics, never returns
// a negative counter, and round-trips.
func FuzzParseTaskSched(f *testing.F) {
	addSeeds(f, "sched")
	f.Fuzz(func(t *testing.T, data []byte) {
		ts, err := ParseTaskSched(data)
		if err != nil {
			return
		}
		if ts.Migrations < 0 || ts.Switches < 0 || ts.VoluntarySwitches < 0 || ts.InvoluntarySwitches < 0 {
			t.Fatalf("ParseTaskSched(%q) = %+v: negative counter", data, ts)
		}
		again, err := ParseTaskSched([]byte(formatSched(ts)))
		if err != nil || again != ts {
			t.Fatalf("round trip of %+v: %+v, %v", ts, again, err)
		}
	})
}

// FuzzParseSchedStat checks that ParseSchedStat never panics and
// round-trips.
func FuzzParseSchedStat(f *testing.F) {
	addSeeds(f, "schedstat")
	f.Fuzz(func(t *testing.T, data []byte) {
		ss, err := ParseSchedStat(data)
		if err != nil {
			return
		}
		if ss.Run < 0 || ss.Wait < 0 || ss.Timeslices < 0 {
			t.Fatalf("ParseSchedStat(%q) = %+v: negative", data, ss)
		}
		line := strconv.FormatInt(int64(ss.Run), 10) + " " + strconv.FormatInt(int64(ss.Wait), 10) + " " + strconv.FormatInt(ss.Timeslices, 10) + "\n"
		if again, err := ParseSchedStat([]byte(line)); err != nil || again != ss {
			t.Fatalf("round trip of %+v: %+v, %v", ss, again, err)
		}
	})
}

// FuzzParseCPUStat checks that ParseCPUStat never panics and never returns
// a negative counter.
func FuzzParseCPUStat(f *testing.F) {
	addSeeds(f, "cpu.stat", "cpu.stat.local")
	f.Add([]byte("usage_usec 2000\nuser_usec 1500\nsystem_usec 500\nnr_periods 10\nnr_throttled 4\nthrottled_usec 3000\nnr_bursts 2\nburst_usec 700\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := ParseCPUStat(data)
		if err != nil {
			return
		}
		if st.Periods < 0 || st.ThrottledPeriods < 0 || st.ThrottledTime < 0 || st.Bursts < 0 || st.BurstTime < 0 ||
			st.Usage < 0 || st.User < 0 || st.System < 0 {
			t.Fatalf("ParseCPUStat(%q) = %+v: negative", data, st)
		}
		if d, err := Delta(st, st); err != nil || d != (ThrottleDelta{}) {
			t.Fatalf("Delta(x, x) = %+v, %v; want zero", d, err)
		}
	})
}

// FuzzParsePSI checks that ParsePSI never panics and keeps averages within
// [0, 100] and totals non-negative.
func FuzzParsePSI(f *testing.F) {
	addSeeds(f, "cpu", "memory", "io", "cpu.pressure")
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePSI(data)
		if err != nil {
			return
		}
		for _, l := range []PSILine{p.Some, p.Full} {
			for _, a := range []float64{l.Avg10, l.Avg60, l.Avg300} {
				if !(a >= 0 && a <= 100) {
					t.Fatalf("ParsePSI(%q) = %+v: average out of range", data, p)
				}
			}
			if l.Total < 0 {
				t.Fatalf("ParsePSI(%q) = %+v: negative total", data, p)
			}
		}
	})
}

// FuzzSweep feeds arbitrary contents to every file one sweep reads: the
// sampler must never panic, whatever procfs says.
func FuzzSweep(f *testing.F) {
	f.Add([]byte(fakeStat(TaskStat{PID: 10, Comm: "a", State: 'R', PPID: 1, StartTime: 5, Processor: 1})),
		[]byte(formatSched(TaskSched{Migrations: 1, Switches: 2, VoluntarySwitches: 1, InvoluntarySwitches: 1})),
		[]byte("1 2 3\n"), []byte("11 12\n"))
	f.Fuzz(func(t *testing.T, stat, sched, schedstat, children []byte) {
		m := fstest.MapFS{}
		for _, tid := range []string{"10", "11"} {
			m["10/stat"] = &fstest.MapFile{Data: stat}
			m["10/task/"+tid+"/stat"] = &fstest.MapFile{Data: stat}
			m["10/task/"+tid+"/sched"] = &fstest.MapFile{Data: sched}
			m["10/task/"+tid+"/schedstat"] = &fstest.MapFile{Data: schedstat}
			m["10/task/"+tid+"/children"] = &fstest.MapFile{Data: children}
			m["11/stat"] = &fstest.MapFile{Data: stat}
			m["11/task/11/stat"] = &fstest.MapFile{Data: stat}
		}
		s := NewSampler(m, 10, 0)
		_ = s.SampleOnce()
		delete(m, "10/task/10/children") // the next sampler scans ppids
		s2 := NewSampler(m, 10, 0)
		_ = s2.SampleOnce()
		_, _ = s.Stop()
		_, _ = s2.Stop()
	})
}
