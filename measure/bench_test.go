package measure

import (
	"os"
	"testing"
	"time"
)

// BenchmarkSampleOnce sweeps a live 8-thread process (each thread busy 1 ms
// in 10) and reports, besides wall time per sweep, the sweep's own CPU time
// (cpu-ns/op, from the thread CPU clock) and what that costs as a share of
// one CPU at DefaultInterval (%cpu@default). The first sweep, which reads the
// stat of every process on the machine to find descendants, is excluded;
// later sweeps read only processes that appeared since.
func BenchmarkSampleOnce(b *testing.B) {
	needProc(b)
	cmd := startChild(b, "8:1ms:9ms:10m")
	s := NewSampler(os.DirFS("/proc"), cmd.Process.Pid, 0)
	if err := s.SampleOnce(); err != nil {
		b.Fatal(err)
	}
	first := s.Snapshot().SamplerCPU
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := s.SampleOnce(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	sm := s.Snapshot()
	if sm.Threads < 8 {
		b.Fatalf("saw %d threads, want >= 8", sm.Threads)
	}
	perSweep := float64(sm.SamplerCPU-first) / float64(sm.Samples-1)
	b.ReportMetric(perSweep, "cpu-ns/op")
	b.ReportMetric(100*perSweep/float64(DefaultInterval), "%cpu@default")
}

// BenchmarkFirstSweep is the one-off cost of the first sweep: it lists
// every process on the machine and reads each one's stat.
func BenchmarkFirstSweep(b *testing.B) {
	needProc(b)
	fsys := os.DirFS("/proc")
	pid := os.Getpid()
	for b.Loop() {
		s := NewSampler(fsys, pid, 0)
		if err := s.SampleOnce(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestOverheadReport runs MeasureOverhead against a live 8-thread process at
// DefaultInterval when MEASURE_OVERHEAD is set (to a duration such as 10s)
// and logs the figure quoted in doc.go. It asserts nothing about timing.
func TestOverheadReport(t *testing.T) {
	d, err := time.ParseDuration(os.Getenv("MEASURE_OVERHEAD"))
	if err != nil {
		t.Skip("set MEASURE_OVERHEAD=10s to measure the sampler's overhead")
	}
	needProc(t)
	cmd := startChild(t, "8:1ms:9ms:10m")
	o, err := MeasureOverhead(os.DirFS("/proc"), cmd.Process.Pid, DefaultInterval, d)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("overhead: %v", o)
}
