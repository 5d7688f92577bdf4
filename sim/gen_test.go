package sim

import (
	"cmp"
	"errors"
	"math"
	"slices"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/alloc"
)

func TestGeneratorProperties(t *testing.T) {
	tests := []struct {
		name string
		gen  func(GenConfig) ([]Event, error)
		// allowed sizes in millicpus per QoS
		sizes map[alloc.QoS][]int
	}{
		{name: "farm", gen: Farm, sizes: map[alloc.QoS][]int{alloc.LSE: {2000, 4000, 6000, 8000}}},
		{name: "mixed", gen: Mixed, sizes: map[alloc.QoS][]int{
			alloc.LSE: {2000, 4000, 8000}, alloc.LSR: {2000, 4000},
			alloc.LS: {500, 1000, 1500, 2000, 2500, 3000, 3500, 4000}, alloc.BE: {1000, 2000, 3000, 4000},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			const jobs = 3000
			evs, err := tc.gen(GenConfig{Jobs: jobs, Seed: 42, Capacity: 6400})
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) != 2*jobs {
				t.Fatalf("%d events, want %d", len(evs), 2*jobs)
			}
			if err := Validate(evs); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if !slices.IsSortedFunc(evs, func(a, b Event) int { return cmp.Compare(a.T, b.T) }) {
				t.Error("times are not sorted")
			}
			arrived := map[string]float64{}
			departed := map[string]bool{}
			qos := map[alloc.QoS]int{}
			for _, ev := range evs {
				switch ev.Op {
				case Arrive:
					if _, dup := arrived[ev.ID]; dup {
						t.Fatalf("%s arrives twice", ev.ID)
					}
					arrived[ev.ID] = ev.T
					r := ev.Request
					m := r.CPUs * 1000
					if r.QoS == alloc.LS || r.QoS == alloc.BE {
						m = r.MilliCPUs
					}
					if !slices.Contains(tc.sizes[r.QoS], m) {
						t.Errorf("%s: %s of %d millicpus, want one of %v", ev.ID, r.QoS, m, tc.sizes[r.QoS])
					}
					qos[r.QoS]++
				case Depart:
					at, ok := arrived[ev.ID]
					if !ok || ev.T <= at {
						t.Errorf("%s departs at %v, arrived at %v (ok %v): want strictly after", ev.ID, ev.T, at, ok)
					}
					departed[ev.ID] = true
				}
			}
			if len(departed) != jobs {
				t.Errorf("%d jobs departed, want %d", len(departed), jobs)
			}
			if len(qos) != len(tc.sizes) {
				t.Errorf("classes drawn %v, want all of %v", qos, tc.sizes)
			}
			again, _ := tc.gen(GenConfig{Jobs: jobs, Seed: 42, Capacity: 6400})
			if d := gocmp.Diff(evs, again); d != "" {
				t.Errorf("same seed, different trace:\n%s", d)
			}
			other, _ := tc.gen(GenConfig{Jobs: jobs, Seed: 43, Capacity: 6400})
			if gocmp.Equal(evs, other) {
				t.Error("seeds 42 and 43 gave the same trace")
			}
		})
	}
}

// TestFarmLoad checks the derived arrival rate: by Little's law the mean
// number of CPUs busy over the arrival window is close to the target.
func TestFarmLoad(t *testing.T) {
	const capacity, target = 6400, 0.8
	evs, err := Farm(GenConfig{Jobs: 20000, Seed: 1, Capacity: capacity, Utilization: target, MeanDuration: 30})
	if err != nil {
		t.Fatal(err)
	}
	var lastArrival, cpuSeconds float64
	start, size := map[string]float64{}, map[string]int{}
	for _, ev := range evs {
		if ev.Op == Arrive {
			lastArrival = ev.T
			start[ev.ID], size[ev.ID] = ev.T, ev.Request.CPUs
		}
	}
	// CPU-seconds offered inside [0, lastArrival].
	for _, ev := range evs {
		if ev.Op == Depart {
			cpuSeconds += float64(size[ev.ID]) * (math.Min(ev.T, lastArrival) - start[ev.ID])
		}
	}
	got := cpuSeconds / lastArrival / capacity
	// The first mean duration is the ramp-up; allow for it and for chance.
	if got < 0.7 || got > 0.85 {
		t.Errorf("mean utilisation over the arrival window = %.3f, want about %.2f", got, target)
	}
}

func TestGeneratorErrors(t *testing.T) {
	for _, cfg := range []GenConfig{
		{Jobs: 10},                                 // no rate, no capacity
		{Jobs: -1, ArrivalRate: 1},                 // negative jobs
		{Jobs: MaxJobs + 1, ArrivalRate: 1},        // past the cap (issue 8: 1e9 jobs exhausted memory)
		{Jobs: 10, ArrivalRate: math.Inf(1)},       // infinite rate
		{Jobs: 10, Capacity: 10, MeanDuration: -1}, // negative duration
		{Jobs: 10, Capacity: 10, Utilization: math.NaN()},
	} {
		if _, err := Farm(cfg); !errors.Is(err, ErrBadConfig) {
			t.Errorf("Farm(%+v) error = %v, want ErrBadConfig", cfg, err)
		}
	}
}
