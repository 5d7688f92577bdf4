// Package bench turns the classic CPU-sharing experiments into commands a
// user runs on their own machine: each Experiment names a parameter space
// (Points), measures one point (Run) and concludes (Analyze: tables,
// charts and a recommendation). RunExperiment measures every point several
// times in a randomised, interleaved order after a warm-up, so that drift of
// a noisy machine spreads over all points, and every ratio an experiment
// reports is taken within one run.
//
// Experiments launch work through package runner and measure it through
// packages measure and loadgen; they never re-implement a batch runner.
// Results go to the results database (package store) as they are measured;
// Rebuild regroups them so `corepin report` regenerates the HTML report
// from the database alone.
package bench
