// Package experiment is the vocabulary the experiments' two front doors
// share: bench, which runs them on one machine, and kube/jobs, which runs
// their cluster form as Kubernetes Jobs. A Point is one configuration of
// an experiment's parameter space, Metrics what one run of it measured,
// Params a run's resolved parameters, and Measurements the store rows
// both doors record, so `corepin report` rebuilds either run alike.
//
// Cluster is the optional ability of an experiment to run as a sweep of
// Jobs: its points as pods, and its metrics from the pods' `corepin run`
// results. bench's experiments implement it; the CLI hands them to
// kube/jobs as a Catalog, so neither door imports the other and kube/jobs
// restates no experiment.
//
// The package runs nothing: it describes and records.
package experiment
