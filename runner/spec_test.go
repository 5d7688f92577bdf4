package runner

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/corepin/corepin/enforce"
)

// The LS real-time route: only LS on the shared pool takes it, and a job's
// real-time share of each CPU is its CPUs' worth of the pool, at most 0.9.
func TestSpecRealTime(t *testing.T) {
	rr := enforce.RealTime{Policy: enforce.RTRR}
	for _, c := range []struct {
		qos  QoS
		mode Mode
		msg  string
	}{
		{qos: BE, msg: "--sched rr is the real-time route of LS work"},
		{qos: LSE, mode: Pinned, msg: "qos LSE: use --qos LS"},
		{qos: LSR, mode: Pinned, msg: "qos LSR: use --qos LS"},
	} {
		_, err := Spec{Commands: [][]string{{"true"}}, Concurrency: 1, CPUs: 1, QoS: c.qos, Mode: c.mode, RealTime: rr, MachineCPUs: 4}.Normalize()
		if !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("qos %s --sched rr: %v, want an ErrSpec saying %q", c.qos, err, c.msg)
		}
	}
	for _, c := range []struct {
		mode Mode
		cpus float64
		pool int
		want float64
	}{
		{Quota, 1, 4, 0.25}, {Quota, 1.5, 2, 0.75}, {Burst, 1, 4, 0.5}, {Burst, 1, 2, 0.9}, {Unbounded, 4, 4, 0.9},
	} {
		s, err := Spec{Commands: [][]string{{"true"}}, Concurrency: 1, CPUs: c.cpus, QoS: LS, Mode: c.mode, RealTime: rr, MachineCPUs: c.pool}.Normalize()
		if err != nil {
			t.Fatal(err)
		}
		if got := s.RTShare(c.pool); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s, %v CPUs of %d: real-time share %v, want %v", c.mode, c.cpus, c.pool, got, c.want)
		}
		s.RealTime = enforce.RealTime{}
		if got := s.RTShare(c.pool); got != 0 {
			t.Errorf("without --sched: share %v, want 0", got)
		}
	}
}
