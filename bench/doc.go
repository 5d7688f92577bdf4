// Package bench turns the classic CPU-sharing experiments into commands a
// user runs on their own machine: each Experiment names a parameter space
// (Points), measures one point (Run) and concludes (Analyze: tables,
// charts and a recommendation). RunExperiment measures every point several
// times in a randomised, interleaved order after a warm-up, so that drift of
// a noisy machine spreads over all points, and every ratio an experiment
// reports is taken within one run.
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
