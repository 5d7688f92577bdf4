package workload

import "strconv"

// SpinOpsArgs returns the corepin arguments (after the binary's name) that
// run a fixed amount of spin work, ops operations shared by the threads,
// and print a JSON report: the job's duration then measures how much CPU it
// got, which is what the batch experiments compare.
func SpinOpsArgs(ops int64, threads string) []string {
	return []string{"workload", NameSpin, "--ops", strconv.FormatInt(ops, 10), "--threads", threads, "-o", "json"}
}
