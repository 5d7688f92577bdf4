package bench

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

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
// nothing. The substitution is now the first line of each batch
// experiment's text, and leads its report section.
func TestSubstituteNoticeComesFirst(t *testing.T) {
	for _, e := range []interface {
		Experiment
		Configurable
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
				pts = []PointResult{{Point: P("cpus", 1, "mode", "pinned", "concurrency", 1), Repeats: []Metrics{{"job_wall_s": 1}}}}
			}
			if e.Name() == "throughput" {
				pts = []PointResult{{Point: P("config", "default", "write", "no"), Repeats: []Metrics{{"rate": 1}}}}
			}
			r := Report{Experiments: []ExperimentReport{{Name: e.Name(), Title: e.Title(), Points: pts, Analysis: e.Analyze(&Env{}, pts)}}}
			var text bytes.Buffer
			if err := WriteText(&text, r); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(text.String(), "\n")
			i := 0
			for i < len(lines) && !strings.HasPrefix(lines[i], "== ") {
				i++
			}
			if i+1 >= len(lines) || !strings.Contains(lines[i+1], "NOTE: no transcodes measured") || !strings.Contains(lines[i+1], "spin kernel") {
				t.Errorf("the line after the %s heading = %q, want the spin-kernel notice:\n%s", e.Name(), lines[min(i+1, len(lines)-1)], text.String())
			}
			var html bytes.Buffer
			if err := RenderHTML(&html, r); err != nil {
				t.Fatal(err)
			}
			doc := html.String()
			h := strings.Index(doc, "<h2>"+e.Name())
			n := strings.Index(doc, "no transcodes measured")
			rec := strings.Index(doc, `<div class="rec`)
			if h < 0 || n < h || (rec >= 0 && n > rec) {
				t.Errorf("the report's %s section does not lead with the notice (heading at %d, notice at %d, recommendation at %d)", e.Name(), h, n, rec)
			}
		})
	}
}
