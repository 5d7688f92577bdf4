// Package bench turns the classic CPU-sharing experiments into commands a
// user runs on their own machine: each Experiment names a parameter space
// (Points), measures one point (Run) and concludes (Analyze: tables,
// charts and a recommendation). RunExperiment measures every point several
// times in a randomised, interleaved order after a warm-up, so that drift of
// a noisy machine spreads over all points, and every ratio an experiment
// reports is taken within one run.
//
// RunAll is `corepin bench`'s loop over the selected experiments, handing
// every measured run to a Recorder as it ends. The batch experiments also
// have a cluster form (experiment.Cluster, Clusters), which kube/jobs runs
// as Kubernetes Jobs: the points, pods and metrics are the experiment's
// own in both places. The vocabulary both share (Point, Metrics, Params,
// the store rows) lives in package experiment.
//
// Experiments launch batches through package runner and every other
// process through package proc (groups, pinning and idle through enforce;
// never taskset, nice(1) or os/exec), and read CPU time through package
// measure; they never re-implement a batch runner. Each run records one
// Params value (its flags and every experiment's resolved spec) with its
// results in the results database (package store); Rebuild regroups the
// results and analyses them with those Params, so `corepin report`
// regenerates exactly the run's report. Package bench/render draws it.
package bench
