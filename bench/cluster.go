package bench

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/corepin/corepin/experiment"
	"github.com/corepin/corepin/runner"
	"github.com/corepin/corepin/topology"
	"github.com/corepin/corepin/workload"
)

// The batch experiments' cluster form (experiment.Cluster): kube/jobs runs
// each point as one Job of pods on a node, and the pods' `corepin run`
// results become the metrics Run measures on one machine.
var (
	_ experiment.Cluster = (*concurrencyExp)(nil)
	_ experiment.Cluster = (*threadsExp)(nil)
	_ experiment.Cluster = (*throughputExp)(nil)
)

// Clusters returns a fresh instance of every experiment with a cluster
// form, in the canonical order: the catalog the CLI gives kube/jobs.
func Clusters() []experiment.Cluster {
	var out []experiment.Cluster
	for _, e := range Experiments() {
		if c, ok := e.(experiment.Cluster); ok {
			out = append(out, c)
		}
	}
	return out
}

// pointError says p is not a point of experiment exp.
func pointError(exp string, p experiment.Point) error {
	return fmt.Errorf("%w: %s point %s is not understood", experiment.ErrUsage, exp, p.Label())
}

// clusterWorkload is the pod's command for the spec's job: the transcode
// where the spec asks for it, else the spin kernel for the job's length
// (auto means transcode only where the node has ffmpeg, which the
// generator cannot see).
func (s jobSpec) clusterWorkload(bin, threads string, write bool) []string {
	if s.Workload == WorkloadTranscode {
		w := append([]string{bin}, workload.TranscodeArgs(workload.ClipOptions{Width: s.ClipWidth, Height: s.ClipHeight, Seconds: s.ClipSeconds},
			workload.TranscodeOptions{Preset: s.Preset}, threads)...)
		if write {
			w = append(w, "--write")
		}
		return w
	}
	return append([]string{bin}, workload.SpinArgs(time.Duration(s.JobSeconds*float64(time.Second)), threads)...)
}

func (e *concurrencyExp) ClusterPoints(node *topology.Topology, quick bool) []experiment.Point {
	return e.Points(&Env{Topo: node, Quick: quick})
}

func (e *concurrencyExp) PointKeys() []string { return []string{"cpus", "mode", "concurrency"} }

// Pods are the point's concurrent jobs, each with its CPUs as requests
// and limits per mode (pinned: Guaranteed whole CPUs, LSE; quota: limit =
// request; burst: limit = 2 x request; unbounded: no limit).
func (e *concurrencyExp) Pods(p experiment.Point, _ int) (experiment.PodSpec, error) {
	k, err1 := strconv.ParseFloat(p.Get("cpus"), 64)
	c, err2 := strconv.Atoi(p.Get("concurrency"))
	if err1 != nil || err2 != nil || k <= 0 {
		return experiment.PodSpec{}, pointError(e.Name(), p)
	}
	j := experiment.PodSpec{Pods: c, Parallel: c, MilliCPU: int64(math.Round(k * 1000)), Mode: p.Get("mode")}
	switch runner.Mode(j.Mode) {
	case runner.Pinned:
		j.LimitMilli, j.QoS = j.MilliCPU, "LSE"
	case runner.Quota:
		j.LimitMilli, j.QoS = j.MilliCPU, "LS"
	case runner.Burst:
		j.LimitMilli, j.QoS = 2*j.MilliCPU, "LS"
	case runner.Unbounded:
		j.QoS = "LS"
	default:
		return experiment.PodSpec{}, pointError(e.Name(), p)
	}
	return j, nil
}

func (e *concurrencyExp) Workload(bin string, _ experiment.Point, threads string) []string {
	return e.spec.Job.clusterWorkload(bin, threads, false)
}

func (e *concurrencyExp) JobSeconds() float64 { return e.spec.Job.JobSeconds }

// Metrics are Run's: the pods' median and longest wall, and their
// migrations and throttled time per job.
func (e *concurrencyExp) Metrics(_ experiment.Point, jobs []runner.JobResult) experiment.Metrics {
	walls := make([]float64, len(jobs))
	var mig, thr float64
	for i, j := range jobs {
		walls[i] = j.WallS
		mig += float64(j.Migrations)
		thr += j.ThrottledS
	}
	nj := float64(len(jobs))
	return experiment.Metrics{"job_wall_s": experiment.Median(walls), "job_wall_max_s": slices.Max(walls),
		"migrations_per_job": mig / nj, "throttled_s_per_job": thr / nj}
}

func (e *threadsExp) ClusterPoints(node *topology.Topology, quick bool) []experiment.Point {
	return e.Points(&Env{Topo: node, Quick: quick})
}

func (e *threadsExp) PointKeys() []string { return []string{"cpus", "threads"} }

// Pods are one pinned pod of the point's CPUs running the point's threads.
func (e *threadsExp) Pods(p experiment.Point, _ int) (experiment.PodSpec, error) {
	k, err := strconv.Atoi(p.Get("cpus"))
	if err != nil || k < 1 {
		return experiment.PodSpec{}, pointError(e.Name(), p)
	}
	t := p.Get("threads")
	if t == "auto" {
		t = workload.ThreadsNative // the encoder's own auto, as Run runs it
	}
	return experiment.PodSpec{Pods: 1, Parallel: 1, MilliCPU: int64(k) * 1000, LimitMilli: int64(k) * 1000, QoS: "LSE", Mode: string(runner.Pinned), Threads: t}, nil
}

func (e *threadsExp) Workload(bin string, _ experiment.Point, threads string) []string {
	return e.spec.Job.clusterWorkload(bin, threads, false)
}

func (e *threadsExp) JobSeconds() float64 { return e.spec.Job.JobSeconds }

// Metrics are Run's: the one pod's rate, wall and migrations.
func (e *threadsExp) Metrics(_ experiment.Point, jobs []runner.JobResult) experiment.Metrics {
	j := jobs[0]
	return experiment.Metrics{"rate": work(j) / j.WallS, "wall_s": j.WallS, "migrations": float64(j.Migrations)}
}

func (e *throughputExp) ClusterPoints(node *topology.Topology, quick bool) []experiment.Point {
	return e.Points(&Env{Topo: node, Quick: quick})
}

func (e *throughputExp) PointKeys() []string { return []string{"config", "write"} }

// Pods are the batch of JobsPerCPU x n jobs: every one at once, unpinned,
// for the default; else W workers at a time of K pinned CPUs each.
func (e *throughputExp) Pods(p experiment.Point, n int) (experiment.PodSpec, error) {
	jobs := max(1, e.spec.JobsPerCPU*n)
	cfg := p.Get("config")
	if cfg == defaultConfig {
		return experiment.PodSpec{Pods: jobs, Parallel: jobs, MilliCPU: max(int64(n)*1000/int64(jobs), 1), QoS: "LS",
			Mode: string(runner.Unbounded), Threads: workload.ThreadsNative}, nil
	}
	w, k, ok := strings.Cut(cfg, "x")
	workers, err1 := strconv.Atoi(w)
	kk, err2 := strconv.Atoi(k)
	if !ok || err1 != nil || err2 != nil || workers < 1 || kk < 1 {
		return experiment.PodSpec{}, pointError(e.Name(), p)
	}
	return experiment.PodSpec{Pods: jobs, Parallel: workers, MilliCPU: int64(kk) * 1000, LimitMilli: int64(kk) * 1000, QoS: "LSE", Mode: string(runner.Pinned)}, nil
}

func (e *throughputExp) Workload(bin string, p experiment.Point, threads string) []string {
	return e.spec.Job.clusterWorkload(bin, threads, p.Get("write") == "yes")
}

func (e *throughputExp) JobSeconds() float64 { return e.spec.Job.JobSeconds }

// Metrics are Run's: the batch's rate over its span, which on a cluster
// runs over several nodes at once (without start times, the longest job).
func (e *throughputExp) Metrics(_ experiment.Point, jobs []runner.JobResult) experiment.Metrics {
	walls := make([]float64, len(jobs))
	var total float64
	var first, last time.Time
	for i, j := range jobs {
		walls[i] = j.WallS
		total += work(j)
		if first.IsZero() || j.StartedAt.Before(first) {
			first = j.StartedAt
		}
		if j.FinishedAt.After(last) {
			last = j.FinishedAt
		}
	}
	elapsed := slices.Max(walls)
	if !first.IsZero() && last.Sub(first).Seconds() > elapsed {
		elapsed = last.Sub(first).Seconds()
	}
	return experiment.Metrics{"rate": total / elapsed, "elapsed_s": elapsed, "job_wall_s": experiment.Median(walls)}
}
