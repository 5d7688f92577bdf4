package bench

import (
	"fmt"
	"strings"
	"testing"

	"github.com/corepin/corepin/experiment"
	"github.com/corepin/corepin/workload"
)

func TestJobSpecResolve(t *testing.T) {
	noFFmpeg := func() error { return fmt.Errorf("%w: ffmpeg is not installed", workload.ErrNoFFmpeg) }
	hasFFmpeg := func() error { return nil }
	tests := []struct {
		name         string
		workload     string
		probe        func() error
		want         string
		wantNotice   bool
		wantUnitName string
	}{
		{name: "auto without ffmpeg", workload: WorkloadAuto, probe: noFFmpeg, want: WorkloadSpin, wantNotice: true, wantUnitName: "ops"},
		{name: "empty without ffmpeg", workload: "", probe: noFFmpeg, want: WorkloadSpin, wantNotice: true, wantUnitName: "ops"},
		{name: "auto with ffmpeg", workload: WorkloadAuto, probe: hasFFmpeg, want: WorkloadTranscode, wantUnitName: "frames"},
		{name: "spin asked for", workload: WorkloadSpin, probe: noFFmpeg, want: WorkloadSpin, wantUnitName: "ops"},
		{name: "transcode asked for", workload: WorkloadTranscode, probe: noFFmpeg, want: WorkloadTranscode, wantUnitName: "frames"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := jobSpec{Workload: tc.workload}
			s.resolveWith(tc.probe)
			if s.Workload != tc.want {
				t.Errorf("Workload = %q, want %q", s.Workload, tc.want)
			}
			if (s.Substitute != "") != tc.wantNotice {
				t.Errorf("Substitute = %q, want a notice: %v", s.Substitute, tc.wantNotice)
			}
			if s.unit() != tc.wantUnitName {
				t.Errorf("unit() = %q, want %q", s.unit(), tc.wantUnitName)
			}
		})
	}
}

// Issue 8 §4: without ffmpeg, `make demo` measured the spin kernel and said
// nothing. Each batch experiment's analysis now carries the substitution
// as its Notice, which package render prints first (render's
// TestNoticeComesFirst).
func TestSubstituteNoticeComesFirst(t *testing.T) {
	for _, e := range []interface {
		Experiment
		experiment.Configurable
	}{&concurrencyExp{}, &threadsExp{}, &throughputExp{}} {
		t.Run(e.Name(), func(t *testing.T) {
			e.Spec(true)
			spec := e.CurrentSpec()
			var job *jobSpec
			switch s := spec.(type) {
			case *concurrencySpec:
				job = &s.Job
			case *threadsSpec:
				job = &s.Job
			case *throughputSpec:
				job = &s.Job
			}
			job.resolveWith(func() error { return workload.ErrNoFFmpeg })
			pts := threadsPoints()
			if e.Name() == "concurrency" {
				pts = []experiment.PointResult{{Point: experiment.P("cpus", 1, "mode", "pinned", "concurrency", 1), Repeats: []experiment.Metrics{{"job_wall_s": 1}}}}
			}
			if e.Name() == "throughput" {
				pts = []experiment.PointResult{{Point: experiment.P("config", "default", "write", "no"), Repeats: []experiment.Metrics{{"rate": 1}}}}
			}
			a := e.Analyze(&Env{}, pts)
			if !strings.HasPrefix(a.Notice, "no transcodes measured") || !strings.Contains(a.Notice, "spin kernel") {
				t.Errorf("%s Analysis.Notice = %q, want the spin-kernel notice", e.Name(), a.Notice)
			}
		})
	}
}
