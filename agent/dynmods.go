package agent

import (
	"os"
	"slices"
	"strings"

	"github.com/corepin/corepin/enforce"
)

// dynModsNote says why, under the driver named driver, an admission after
// a pause may wait several milliseconds, or "" when it need not: on
// cgroup v1 every admission moves a task into its group, which takes the
// kernel's cgroup_threadgroup_rwsem for writing, and unless a cgroup
// hierarchy favours dynamic modifications (one mounted with favordynmods,
// or cgroup_favordynmods=true on the kernel command line cmdline), the
// first writer after a quiet spell waits for an RCU grace period
// (docs/reference/agent.md). mounts are the machine's mounts.
func dynModsNote(driver string, mounts []enforce.Mount, cmdline string) string {
	if driver != enforce.NameV1 {
		return ""
	}
	for _, f := range strings.Fields(cmdline) {
		// The kernel reads the value with kstrtobool: y, t, 1, e, on.
		if v, ok := strings.CutPrefix(f, "cgroup_favordynmods="); ok && (strings.ContainsAny(v[:min(1, len(v))], "yYtT1eE") || strings.EqualFold(v, "on")) {
			return ""
		}
	}
	for _, m := range mounts {
		if (m.FSType == "cgroup" || m.FSType == "cgroup2") && slices.Contains(strings.Split(m.SuperOptions, ","), "favordynmods") {
			return ""
		}
	}
	return "no cgroup hierarchy favours dynamic modifications: the first admission after a pause waits for an RCU grace period " +
		"(several ms) before moving its task; boot with cgroup_favordynmods=true, or mount one hierarchy with favordynmods, to trade it for slightly dearer forks and exits"
}

// hostDynModsNote is dynModsNote for this machine; "" when its mounts
// cannot be read.
func hostDynModsNote(driver string) string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	mounts, err := enforce.ParseMountinfo(f)
	if err != nil {
		return ""
	}
	cmdline, _ := os.ReadFile("/proc/cmdline")
	return dynModsNote(driver, mounts, string(cmdline))
}
