package bench

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/corepin/corepin/experiment"
	"github.com/corepin/corepin/store"
)

// nameExp is countExp under another name, so one run holds two.
type nameExp struct {
	countExp
	name string
}

func (n *nameExp) Name() string { return n.name }

// RunAll records every measured repeat and each experiment's own rows,
// goes on after a failed experiment and names it; a recorder that fails
// is reported; an ended context stops the loop.
func TestRunAll(t *testing.T) {
	newExps := func() []Experiment {
		a, b := &nameExp{name: "a"}, &nameExp{name: "b"}
		a.failOn = "2"
		a.Spec(true)
		b.Spec(true)
		return []Experiment{a, b}
	}
	var rows []store.Measurement
	measured := 0
	o := Options{Repeats: 2, Seed: 5, OnMeasure: func(string, experiment.Point, int, experiment.Metrics, error) { measured++ }}
	reps, err := RunAll(context.Background(), &Env{}, newExps(), o, func(ms ...store.Measurement) error {
		rows = append(rows, ms...)
		return nil
	})
	if !errors.Is(err, ErrFailed) || !strings.HasSuffix(err.Error(), ": a") {
		t.Errorf("RunAll error = %v, want experiments failed: a", err)
	}
	if len(reps) != 2 || reps[0].Error == "" || reps[1].Error != "" {
		t.Fatalf("reports = %+v, want a failed and b measured", reps)
	}
	if measured != 8 {
		t.Errorf("OnMeasure called %d times, want 8 (2 experiments x 2 points x 2 repeats)", measured)
	}
	count := map[string]int{}
	for _, r := range rows {
		key := r.Experiment + " " + r.Metric
		if r.Repeat == experiment.NoRepeat {
			key = r.Experiment + " " + r.Metric + " (experiment)"
		}
		count[key]++
	}
	want := map[string]int{
		// a's size 2 failed both repeats: only size 1 was measured.
		"a value": 2, "a repeat_seen": 2, "b value": 4, "b repeat_seen": 4,
		"a experiment_elapsed_s (experiment)": 1, "b experiment_elapsed_s (experiment)": 1,
		"a point_index (experiment)": 2, "b point_index (experiment)": 2, "a failed_repeats (experiment)": 1,
	}
	if len(count) != len(want) {
		t.Errorf("recorded rows %v, want %v", count, want)
	}
	for k, n := range want {
		if count[k] != n {
			t.Errorf("%d rows of %s, want %d (all: %v)", count[k], k, n, count)
		}
	}

	boom := errors.New("disk full")
	_, err = RunAll(context.Background(), &Env{}, newExps(), o, func(...store.Measurement) error { return boom })
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "recording measurements") {
		t.Errorf("RunAll with a failing recorder: error = %v, want recording measurements: disk full", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	reps, err = RunAll(ctx, &Env{}, newExps(), o, func(...store.Measurement) error { return nil })
	if !errors.Is(err, context.Canceled) || len(reps) != 1 {
		t.Errorf("RunAll after cancel: %d reports, error %v; want 1 and context canceled", len(reps), err)
	}
}
