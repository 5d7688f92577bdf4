package sim

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/corepin/corepin/alloc"
)

// GenConfig describes a generated trace. Inter-arrival times and durations
// are exponential (a Poisson arrival process), drawn from a PCG generator
// seeded with Seed, so the same config always gives the same trace. Times are
// on a millisecond grid and every job departs at least 1 ms after it arrives.
type GenConfig struct {
	// Jobs is the number of jobs (each one arrive and one depart event).
	Jobs int
	// Seed seeds the random generator.
	Seed uint64
	// ArrivalRate is in jobs per second. Zero derives it from Capacity and
	// Utilization: rate = Utilization x Capacity / (mean CPUs x mean duration),
	// so that the offered load keeps that share of the cluster busy.
	ArrivalRate float64
	// MeanDuration is the mean job duration in seconds (default 60).
	MeanDuration float64
	// Capacity is the cluster's schedulable CPUs (nodes x CPUs per node),
	// used only to derive ArrivalRate.
	Capacity int
	// Utilization is the target share of Capacity in use (default 0.8).
	Utilization float64
}

// FarmSizes are the CPU counts of transcode jobs: whole cores on SMT2
// machines, and the sizes the concurrency studies found best (many small
// jobs, threads = CPUs).
var FarmSizes = []int{2, 4, 6, 8}

// jobKind is one class of job a generator draws from.
type jobKind struct {
	name     string
	weight   float64
	qos      alloc.QoS
	milli    []int   // sizes in millicpus, drawn uniformly
	duration float64 // multiple of the mean duration
	exclude  bool    // not counted in the offered load (BE filler)
}

// Farm generates a transcoding farm: LSE jobs of 2, 4, 6 or 8 CPUs (equally
// likely), exponential inter-arrival times and durations.
func Farm(cfg GenConfig) ([]Event, error) {
	sizes := make([]int, len(FarmSizes))
	for i, s := range FarmSizes {
		sizes[i] = s * 1000
	}
	return generate(cfg, "farm", []jobKind{{name: "farm", weight: 1, qos: alloc.LSE, milli: sizes, duration: 1}})
}

// Mixed generates an LS/BE fleet: long-lived LSE services (2, 4 or 8 CPUs,
// 15% of jobs, 10x the mean duration), LSR services (2 or 4 CPUs, 10%, 10x),
// LS workloads with fractional quotas (0.5 to 4 CPUs, 35%, 1x) and BE filler
// (1 to 4 CPUs, 40%, 0.5x). BE is not counted in the offered load: it only
// borrows what the others leave idle.
func Mixed(cfg GenConfig) ([]Event, error) {
	return generate(cfg, "mixed", []jobKind{
		{name: "svc", weight: 0.15, qos: alloc.LSE, milli: []int{2000, 4000, 8000}, duration: 10},
		{name: "rsv", weight: 0.10, qos: alloc.LSR, milli: []int{2000, 4000}, duration: 10},
		{name: "ls", weight: 0.35, qos: alloc.LS, milli: []int{500, 1000, 1500, 2000, 2500, 3000, 3500, 4000}, duration: 1},
		{name: "be", weight: 0.40, qos: alloc.BE, milli: []int{1000, 2000, 3000, 4000}, duration: 0.5, exclude: true},
	})
}

func generate(cfg GenConfig, what string, kinds []jobKind) ([]Event, error) {
	if cfg.Jobs < 0 || cfg.Jobs > MaxJobs {
		return nil, fmt.Errorf("%w: %s: %d jobs (want 0 to %d)", ErrBadConfig, what, cfg.Jobs, MaxJobs)
	}
	if cfg.MeanDuration == 0 {
		cfg.MeanDuration = 60
	}
	if cfg.Utilization == 0 {
		cfg.Utilization = 0.8
	}
	if !(cfg.MeanDuration > 0) || math.IsInf(cfg.MeanDuration, 0) || !(cfg.Utilization > 0) || math.IsInf(cfg.Utilization, 0) ||
		cfg.ArrivalRate < 0 || math.IsNaN(cfg.ArrivalRate) || math.IsInf(cfg.ArrivalRate, 0) {
		return nil, fmt.Errorf("%w: %s: mean duration %v, utilization %v and arrival rate %v must be finite and above 0",
			ErrBadConfig, what, cfg.MeanDuration, cfg.Utilization, cfg.ArrivalRate)
	}
	rate := cfg.ArrivalRate
	if rate == 0 {
		if cfg.Capacity <= 0 {
			return nil, fmt.Errorf("%w: %s: give an arrival rate, or the cluster capacity in CPUs to derive one", ErrBadConfig, what)
		}
		// Offered CPU-seconds per job, over the kinds counted.
		var perJob float64
		for _, k := range kinds {
			if k.exclude {
				continue
			}
			var mean float64
			for _, m := range k.milli {
				mean += float64(m) / 1000
			}
			mean /= float64(len(k.milli))
			perJob += k.weight * mean * k.duration * cfg.MeanDuration
		}
		rate = cfg.Utilization * float64(cfg.Capacity) / perJob
	}
	var total float64
	for _, k := range kinds {
		total += k.weight
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x636f726570696e)) // "corepin"
	type ev struct {
		ms  int64
		seq int
		Event
	}
	evs := make([]ev, 0, 2*cfg.Jobs)
	var now int64
	for i := range cfg.Jobs {
		now += int64(math.Round(rng.ExpFloat64() / rate * 1000))
		pick := rng.Float64() * total
		k := kinds[len(kinds)-1]
		for _, kk := range kinds {
			if pick < kk.weight {
				k = kk
				break
			}
			pick -= kk.weight
		}
		m := k.milli[rng.IntN(len(k.milli))]
		dur := max(1, int64(math.Round(rng.ExpFloat64()*k.duration*cfg.MeanDuration*1000)))
		id := fmt.Sprintf("%s-%d", k.name, i)
		r := alloc.Request{ID: id, QoS: k.qos}
		if k.qos == alloc.LS || k.qos == alloc.BE {
			r.MilliCPUs = m
		} else {
			r.CPUs = m / 1000
		}
		evs = append(evs,
			ev{ms: now, seq: 2 * i, Event: Event{Op: Arrive, ID: id, Request: r}},
			ev{ms: now + dur, seq: 2*i + 1, Event: Event{Op: Depart, ID: id}})
	}
	// Departures first at equal times (they free what the arrival may need),
	// then in generation order.
	slices.SortFunc(evs, func(a, b ev) int {
		return cmp.Or(cmp.Compare(a.ms, b.ms), cmp.Compare(opOrder(a.Op), opOrder(b.Op)), cmp.Compare(a.seq, b.seq))
	})
	out := make([]Event, len(evs))
	for i, e := range evs {
		e.T = float64(e.ms) / 1000
		out[i] = e.Event
	}
	return out, nil
}

func opOrder(op Op) int {
	if op == Depart {
		return 0
	}
	return 1
}
