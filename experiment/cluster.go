package experiment

import (
	"fmt"
	"slices"
	"strings"

	"github.com/corepin/corepin/runner"
	"github.com/corepin/corepin/topology"
)

// Cluster is the optional ability of an experiment to run on Kubernetes
// as a sweep of Jobs (kube/jobs): each point x repeat is one Job whose
// pods are the point's concurrent jobs, each running the experiment's
// workload under `corepin run`, and the pods' results become the point's
// metrics, as Run measures them on one machine. The experiment is
// configured (Configure) before any of these are called.
type Cluster interface {
	Named
	Configurable
	// ClusterPoints are the points to measure on nodes of topology node:
	// those the experiment measures on one machine of that topology.
	ClusterPoints(node *topology.Topology, quick bool) []Point
	// PointKeys are the coordinates of every point, in order.
	PointKeys() []string
	// Pods maps point p onto the pods of one Job on a node of n CPUs; the
	// error (wrapping ErrUsage) says p is not one of the experiment's.
	Pods(p Point, n int) (PodSpec, error)
	// Workload is the command each pod's `corepin run` runs after "--":
	// bin is corepin's path in the image, threads the workload's thread
	// argument ("{threads}", a count or workload.ThreadsNative).
	Workload(bin string, p Point, threads string) []string
	// JobSeconds is how long one pod's job is meant to run.
	JobSeconds() float64
	// Metrics are one repeat's metrics of p from its pods' results (at
	// least one, each with a wall time above 0).
	Metrics(p Point, jobs []runner.JobResult) Metrics
}

// PodSpec is what one Job of a point runs: its pods and their resources.
type PodSpec struct {
	// Pods is the number of pods (completions); Parallel run at once.
	Pods, Parallel int
	// MilliCPU is each pod's CPU request; LimitMilli its limit, 0 for none.
	MilliCPU, LimitMilli int64
	// QoS is the Koordinator QoS class label the pod carries.
	QoS string
	// Mode is the point's enforcement mode, as the pod's resources carry it.
	Mode string
	// Threads is the workload's thread count: "" (sized to the pod's CPUs
	// by corepin run), a count, or workload.ThreadsNative.
	Threads string
}

// Catalog returns a fresh instance of every experiment that has a
// cluster form, in run order: configuring one leaves the next call's
// alone. The CLI gives kube/jobs bench's (bench.Clusters).
type Catalog func() []Cluster

// Names are the catalog's experiment names, in order.
func (c Catalog) Names() []string {
	if c == nil {
		return nil
	}
	var out []string
	for _, e := range c() {
		out = append(out, e.Name())
	}
	return out
}

// Index is the place of experiment name in the catalog, -1 when it has
// none.
func (c Catalog) Index(name string) int { return slices.Index(c.Names(), name) }

// Lookup returns a fresh instance of the experiment named; the error
// (wrapping ErrUsage) lists the names known.
func (c Catalog) Lookup(name string) (Cluster, error) {
	if c != nil {
		for _, e := range c() {
			if e.Name() == name {
				return e, nil
			}
		}
	}
	names := c.Names()
	if len(names) == 0 {
		return nil, fmt.Errorf("%w: sweep %q: no experiments to choose from (give a catalog, such as bench.Clusters)", ErrUsage, name)
	}
	return nil, fmt.Errorf("%w: sweep %q: choose from %s", ErrUsage, name, strings.Join(names, ", "))
}
