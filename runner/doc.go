// Package runner runs a batch of jobs: N commands, C at a time, each in its
// own enforcement group with K CPUs (pinned, quota, burst or unbounded),
// its thread count sized to K through placeholders and environment, and
// each started, measured and stopped through package proc (what a job
// leaves running is named in its result, killed, and its group removed).
// Each job's group settings come from qos.Resources, the one mapping from
// mode and QoS class to group settings.
//
// The runner holds no global state: CPUs for pinned jobs come from a Placer
// (the allocator), groups from an enforce.Driver, and results go to the
// caller through OnResult as each job ends, so a killed batch keeps what
// finished. Cancelling the context kills running jobs' process groups,
// removes their groups and releases their CPUs.
package runner
