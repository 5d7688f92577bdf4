package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/corepin/corepin/experiment"
	"github.com/corepin/corepin/store"
	"github.com/corepin/corepin/topology"
)

// Recorder keeps the store rows of a run as they are measured: in
// `corepin bench`, the results database's AddMeasurement for the run.
type Recorder func(rows ...store.Measurement) error

// RunAll is `corepin bench`'s loop: it measures exps in order
// (RunExperiment with o), hands every measured repeat to rec as it ends
// and, after each experiment, the experiment's own rows (its elapsed time,
// its points' order and failures), so that Rebuild makes the report again
// from the database. o.OnMeasure, when set, is called before a run is
// recorded. An experiment that fails is reported (ExperimentReport.Error)
// and the next one runs; ctx ending stops the loop after the experiment
// it interrupted. The reports come back whatever the error, which says,
// first to last: that ctx ended, that rows could not be recorded (the
// first failure), or which experiments failed.
func RunAll(ctx context.Context, env *Env, exps []Experiment, o Options, rec Recorder) ([]ExperimentReport, error) {
	var recErr error
	record := func(rows []store.Measurement, err error) {
		if err == nil {
			err = rec(rows...)
		}
		if err != nil && recErr == nil {
			recErr = err
		}
	}
	onMeasure := o.OnMeasure
	o.OnMeasure = func(exp string, p experiment.Point, repeat int, m experiment.Metrics, err error) {
		if onMeasure != nil {
			onMeasure(exp, p, repeat, m, err)
		}
		if err == nil && m != nil {
			record(experiment.Measurements(exp, p, repeat, m))
		}
	}
	var reps []ExperimentReport
	var failed []string
	for _, x := range exps {
		rep, err := RunExperiment(ctx, env, x, o)
		if err != nil {
			rep.Error = err.Error()
			failed = append(failed, x.Name())
		}
		record(experiment.ExperimentMeasurements(rep.Name, rep.Elapsed, rep.Points))
		reps = append(reps, rep)
		if ctx.Err() != nil {
			break
		}
	}
	switch {
	case ctx.Err() != nil:
		return reps, fmt.Errorf("bench stopped: %w", ctx.Err())
	case recErr != nil:
		return reps, fmt.Errorf("recording measurements: %w", recErr)
	case len(failed) > 0:
		return reps, fmt.Errorf("%w: %s", ErrFailed, strings.Join(failed, ", "))
	}
	return reps, nil
}

// ErrFailed is wrapped by RunAll's error when experiments failed.
var ErrFailed = errors.New("experiments failed")

// NewReport is the head of a run's report before any experiment is
// measured: the run as recorded (store.NewRun), its parameters and the
// machine's topology.
func NewReport(run store.Run, params experiment.Params, topo *topology.Topology) Report {
	var text bytes.Buffer
	_ = topo.Render(&text, topology.RenderOptions{})
	return Report{
		GeneratedAt: run.StartedAt, CorepinVersion: run.CorepinVersion, Kernel: run.Kernel, Hostname: run.Hostname,
		Quick: params.Quick, Driver: params.Driver, Topology: topo.Doc(), TopologySummary: topo.Summary(),
		TopologyText: text.String(), Commands: params.Commands, Params: params,
	}
}
