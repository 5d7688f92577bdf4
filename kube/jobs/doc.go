// Package jobs turns a corepin bench sweep (concurrency, threads or
// throughput) into numbered Kubernetes Jobs, and brings the results their
// pods print back into the results database, so `corepin report` works on
// a cluster run as on one machine.
//
// A sweep runs one experiment's cluster form (experiment.Cluster), found
// by name in the catalog the caller gives (Options.Experiments,
// Collection.Experiments; the CLI gives bench.Clusters): the experiment
// configures itself from the spec file, gives its points for the node
// type, maps each onto pods and turns the pods' results into its metrics,
// so a spec file means the same on a cluster as under `corepin bench` and
// kube/jobs restates none of them. Each point x
// repeat is one Job: its pods are the point's concurrent jobs, each with
// the point's CPUs as requests and limits per enforcement mode (pinned:
// Guaranteed whole CPUs and QoS class LSE; quota: limit = request; burst:
// limit = 2 x request; unbounded: no limit). A pod runs `corepin run ... -o
// json` on the workload, then `corepin kube result` (WriteResult), which
// prints one line "corepin-result {...}" (Marker: the point, its place in
// the sweep and the run's full JSON result) to the log and writes the
// compact result document (Document, {"v":1,...}: the same fields with the
// job's measured figures only) to the container's termination message,
// which Kubernetes keeps (at most 4096 bytes) in the pod's status. A
// document over 4096 bytes is not written; the log line is the fallback.
// The largest realistic documents are about 3000 bytes.
//
// Collect takes results from termination messages (AddDocument, as
// `corepin kube collect` reads them through the API server) or from pod
// logs (Add: one per pod or all in one stream, as `kubectl logs` gives
// them), and records them (store): the pods' jobs as job rows and, per
// point and repeat, the metrics the experiment's own analysis reads. A pod
// without a usable result is skipped with a reason, never fatal.
//
// Runner runs the Jobs on a cluster itself (`corepin kube run`): one at a
// time, in order, each created with strict field validation and read back
// until it is complete or failed; a Job left by an earlier run is resumed,
// not created again. A failed or hung Job is reported with what its pods
// say (PodReason). RecordEnded then collects the pods of the Jobs that
// ended (Cluster.Jobs) into the results database, and RunSummary.Failure
// says what went wrong with the others and what to do next.
package jobs
