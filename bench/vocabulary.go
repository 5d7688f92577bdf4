package bench

import "github.com/corepin/corepin/experiment"

// bench's experiments speak the vocabulary of package experiment, which
// kube/jobs shares; these names keep it readable in bench's own files.
type (
	KV               = experiment.KV
	Point            = experiment.Point
	Metrics          = experiment.Metrics
	PointResult      = experiment.PointResult
	Params           = experiment.Params
	ExperimentParams = experiment.ExperimentParams
	Configurable     = experiment.Configurable
)
