// Package runner runs a batch of jobs: N commands, C at a time, each in its
// own enforcement group with K CPUs (pinned, quota, burst or unbounded),
// its thread count sized to K through placeholders and environment, and
// each measured by package measure while it runs.
//
// The runner holds no global state: CPUs for pinned jobs come from a Placer
// (the allocator), groups from an enforce.Driver, and results go to the
// caller through OnResult as each job ends, so a killed batch keeps what
// finished. Cancelling the context kills running jobs' process groups,
// removes their groups and releases their CPUs.
package runner
