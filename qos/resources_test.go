package qos

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/enforce"
)

// Resources is the one mapping from mode and QoS class to group settings.
func TestResources(t *testing.T) {
	pool, set, mems := cpuset.Range(0, 7), cpuset.New(2, 3), cpuset.New(0)
	ms := 10 * time.Millisecond
	tests := []struct {
		name   string
		mode   Mode
		qos    alloc.QoS
		k      float64
		cpus   cpuset.CPUSet
		period time.Duration
		want   enforce.Resources
	}{
		{name: "pinned LSE", mode: ModePinned, qos: alloc.LSE, k: 2, cpus: set, want: enforce.Resources{CPUs: set, Mems: mems}},
		{name: "quota LS", mode: ModeQuota, qos: alloc.LS, k: 1.5, cpus: pool, want: enforce.Resources{CPUs: pool, Quota: 150 * time.Millisecond, Period: enforce.DefaultPeriod}},
		{name: "burst LS, own period", mode: ModeBurst, qos: alloc.LS, k: 1, cpus: pool, period: ms, want: enforce.Resources{CPUs: pool, Quota: 2 * ms, Period: ms}},
		{name: "unbounded LS weighs K", mode: ModeUnbounded, qos: alloc.LS, k: 3, cpus: pool, want: enforce.Resources{CPUs: pool, Weight: 300}},
		{name: "unbounded weight clamped", mode: ModeUnbounded, qos: alloc.LS, k: 1000, cpus: pool, want: enforce.Resources{CPUs: pool, Weight: enforce.MaxWeight}},
		{name: "BE is idle, never weighted", mode: ModeUnbounded, qos: alloc.BE, k: 2, cpus: pool, want: enforce.Resources{CPUs: pool, Idle: true}},
		{name: "tiny quota clamped to the kernel minimum", mode: ModeQuota, qos: alloc.LS, k: 0.001, cpus: pool, want: enforce.Resources{CPUs: pool, Quota: enforce.MinQuota, Period: enforce.DefaultPeriod}},
		{name: "a quota of 0.29 CPUs is 29ms, not 28.999999ms (rounded, not truncated)", mode: ModeQuota, qos: alloc.LS, k: 0.29, cpus: pool, want: enforce.Resources{CPUs: pool, Quota: 29 * time.Millisecond, Period: enforce.DefaultPeriod}},
		{name: "BE quota keeps its quota", mode: ModeQuota, qos: alloc.BE, k: 1, cpus: pool, want: enforce.Resources{CPUs: pool, Quota: 100 * time.Millisecond, Period: enforce.DefaultPeriod, Idle: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := cpuset.CPUSet{}
			if tc.mode == ModePinned {
				m = mems
			}
			got := Resources(tc.mode, tc.qos, tc.k, tc.cpus, m, tc.period)
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(cpuset.CPUSet.Equals)); diff != "" {
				t.Errorf("Resources() (-want +got):\n%s", diff)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("Resources() = %+v, invalid: %v", got, err)
			}
		})
	}
}

func TestClassResources(t *testing.T) {
	pool, set, mems := cpuset.Range(0, 7), cpuset.New(2, 3), cpuset.New(0)
	tests := []struct {
		name       string
		qos        alloc.QoS
		k          float64
		cpus, mems cpuset.CPUSet
		want       enforce.Resources
	}{
		{name: "LSE pinned with its memory nodes", qos: alloc.LSE, k: 2, cpus: set, mems: mems, want: enforce.Resources{CPUs: set, Mems: mems}},
		{name: "LSR pinned", qos: alloc.LSR, k: 2, cpus: set, mems: mems, want: enforce.Resources{CPUs: set, Mems: mems}},
		{name: "LS quota of its milli-CPUs", qos: alloc.LS, k: 0.25, cpus: pool, want: enforce.Resources{CPUs: pool, Quota: 25 * time.Millisecond, Period: enforce.DefaultPeriod}},
		{name: "BE idle, no quota, no weight", qos: alloc.BE, k: 4, cpus: pool, want: enforce.Resources{CPUs: pool, Idle: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ClassResources(tc.qos, tc.k, tc.cpus, tc.mems)
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(cpuset.CPUSet.Equals)); diff != "" {
				t.Errorf("ClassResources() (-want +got):\n%s", diff)
			}
		})
	}
}
