package archtest

import (
	"bufio"
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/corepin/corepin"

// rule forbids packages matching from to import packages matching to
// (direct imports of non-test files). A pattern ending in "/..." matches
// the package and everything under it; "std:NAME" names a standard-library
// package.
type rule struct {
	from, to []string
	why      string
}

// frontDoors are the thin entry points; nothing in the core may reach them.
var frontDoors = []string{"cmd/...", "agent/...", "kube/...", "bench/..."}

// doors are the front doors that stand side by side on the core: none of
// them imports another (the CLI in cmd/ sits above them all and assembles
// them). kube/ packages not named here are libraries the doors share.
var doors = []string{"agent/...", "bench/...", "kube/nri/...", "kube/extender/...", "kube/jobs/...", "cmd/..."}

// leaves are the small helpers under internal/: they import nothing of
// corepin, so no arrow runs from them back up into the house.
var leaves = []string{"internal/quote", "internal/mountinfo", "internal/testutil", "internal/userfile"}

// tiers rank every package from the bottom of the house up: a package may
// import its own tier or a lower one, never a higher one (an arrow running
// back up). Within the core, the rules below order the packages further.
var tiers = [][]string{
	leaves,
	slices.Concat(core, []string{"enforce/enforcetest"}),
	{"kube/podmeta", "kube/podreq", "kube/kubeclient/...", "kube/publish/...", "kube/nodestate/...", "kube/nodeview", "kube/manifests/..."},
	{"agent/...", "bench/...", "kube/nri/...", "kube/extender/...", "kube/jobs/..."},
	{"cmd/..."},
}

// doorExceptions are door-to-door imports being taken apart (none today);
// each entry is removed with the import it names, and an entry that no
// longer names a live import fails the test.
var doorExceptions = map[[2]string]bool{}

// core are the packages below the front doors, in the order data flows.
var core = []string{"cpuset", "topology", "alloc", "plan", "enforce", "measure", "qos", "store", "proc", "runner", "experiment", "sim", "workload", "loadgen", "netbench", "wakescan", "irq", "schedext", "nodecore"}

var rules = []rule{
	{from: core, to: frontDoors, why: "core packages never import a front door (CLI, agent, kube, bench)"},
	{from: []string{"cpuset"}, to: append([]string{"std:os", "std:os/exec", "std:io/fs", "std:net", "std:syscall"}, core[1:]...),
		why: "cpuset is a value type: no I/O, and below every other package"},
	{from: []string{"topology"}, to: []string{"alloc", "plan", "enforce", "measure", "store", "proc", "runner", "sim"},
		why: "topology describes the machine and decides nothing"},
	{from: []string{"alloc", "plan"}, to: []string{"enforce", "measure", "store", "proc", "runner", "std:os", "std:os/exec", "std:syscall", "std:net", "std:net/http"},
		why: "alloc is pure placement: it never touches the system"},
	{from: []string{"enforce"}, to: []string{"alloc", "plan", "runner", "proc", "store"},
		why: "enforce applies a decision, it never chooses CPUs"},
	{from: []string{"measure"}, to: []string{"enforce", "alloc", "runner", "proc", "store"},
		why: "measure accounts for processes, it never launches or places them"},
	{from: []string{"qos"}, to: []string{"runner", "proc", "store", "sim", "workload", "loadgen", "netbench"},
		why: "qos decides and applies BE's allowance through measure and enforce; runner and the agent host it"},
	{from: []string{"store"}, to: []string{"std:net/http", "enforce", "runner", "proc", "alloc", "plan"},
		why: "store persists values; it knows neither HTTP nor groups nor placement"},
	{from: []string{"nodecore"}, to: []string{"plan", "sim", "workload", "loadgen", "netbench", "std:net", "std:net/http",
		"k8s.io/...", "github.com/containerd/nri/...", "github.com/prometheus/...", "gopkg.in/yaml.v3"},
		why: "nodecore is the node's state, allocator, admission and groups: it serves nothing, reads no wire form but the state file, and keeps Kubernetes, NRI and metrics types out (the doors convert)"},
	{from: slices.DeleteFunc(slices.Clone(core), func(p string) bool { return p == "nodecore" }), to: []string{"nodecore"},
		why: "nodecore sits on top of the core: the packages it builds on never reach back into it"},
	{from: []string{"experiment"}, to: []string{"enforce", "proc", "measure", "qos", "alloc", "plan", "sim", "workload", "loadgen", "netbench", "std:os", "std:os/exec", "std:net"},
		why: "experiment is the experiments' shared vocabulary (points, metrics, parameters, cluster form): it describes and records, it runs nothing"},
	{from: []string{"wakescan"}, to: []string{"alloc", "plan", "enforce", "runner", "proc", "qos", "sim", "workload", "loadgen", "netbench"},
		why: "wakescan switches one scheduler feature, recorded in the state file: it places nothing and makes no group"},
	{from: []string{"irq"}, to: []string{"alloc", "plan", "enforce", "runner", "proc", "qos", "topology", "sim", "workload", "loadgen", "netbench", "wakescan"},
		why: "irq moves interrupts off CPUs it is given, recorded in the state file: it chooses no CPU and makes no group"},
	{from: []string{"schedext"}, to: slices.DeleteFunc(slices.Clone(core), func(p string) bool {
		return p == "schedext" || p == "topology" || p == "measure" || p == "store"
	}),
		why: "schedext writes the layered scheduler's config from corepin's classes and group names and supervises scx_layered: it reads the kernel's sched_ext state through topology, names its process through measure and records it in the state file (store); it places nothing and makes no group"},
	{from: []string{"agent/..."}, to: []string{"bench/...", "cmd/..."},
		why: "the agent is a front door on the core; the CLI and bench sit beside it, not under it"},
	{from: []string{"bench/..."}, to: []string{"std:os/exec"},
		why: "experiments start every process through proc/runner, never os/exec"},
	{from: []string{"kube/podmeta"}, to: append([]string{"std:os", "std:os/exec", "std:io/fs", "std:net", "std:net/http", "std:syscall",
		"k8s.io/api/...", "k8s.io/apimachinery/...", "github.com/containerd/nri/...", "agent/...", "cmd/...", "bench/..."}, core[3:]...),
		why: "podmeta reads pod metadata from plain values: no I/O, no Kubernetes or NRI types, nothing beyond alloc, so the extender and the NRI plugin share it"},
	{from: []string{"kube/nodeview"}, to: []string{"k8s.io/kube-scheduler/...", "k8s.io/kubernetes/...", "k8s.io/client-go/...",
		"std:net", "std:net/http", "std:os", "std:os/exec", "plan", "nodecore", "sim", "agent/...", "cmd/...", "bench/...", "kube/nri/...", "kube/extender/..."},
		why: "nodeview is the scheduler side's one node view: fed by its doors, it serves nothing, talks to no API server and knows no scheduling framework (Kubernetes API types only), so both scheduler doors can hold it"},
	{from: core, to: []string{"std:flag", "github.com/spf13/cobra"},
		why: "command lines are parsed in cmd/corepin/cli only"},
	{from: leaves, to: []string{"..."},
		why: "the leaves under internal/ import nothing of corepin"},
}

func matches(pattern, pkg string) bool {
	if name, ok := strings.CutPrefix(pattern, "std:"); ok {
		return pkg == name
	}
	if pattern == "..." {
		return strings.HasPrefix(pkg, module+"/")
	}
	if first, _, _ := strings.Cut(pattern, "/"); !strings.Contains(first, ".") {
		pattern = module + "/" + pattern // a corepin package, named relative to the module
	}
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == base || strings.HasPrefix(pkg, base+"/")
	}
	return pkg == pattern
}

func anyMatch(patterns []string, pkg string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool { return matches(p, pkg) })
}

// imports lists every package of the module with its direct imports, as
// go list reports them for non-test files.
func imports(t *testing.T) map[string][]string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go toolchain not on PATH")
	}
	out, err := exec.Command(gobin, "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	m := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 {
			m[f[0]] = f[1:]
		}
	}
	return m
}

func TestImportRules(t *testing.T) {
	graph := imports(t)
	if len(graph) < 10 {
		t.Fatalf("go list found %d packages, want the whole module", len(graph))
	}
	for pkg, deps := range graph {
		for _, r := range rules {
			if !anyMatch(r.from, pkg) {
				continue
			}
			for _, d := range deps {
				if anyMatch(r.to, d) {
					t.Errorf("%s imports %s: %s", strings.TrimPrefix(pkg, module+"/"), strings.TrimPrefix(d, module+"/"), r.why)
				}
			}
		}
	}
}

// doorOf is the door pkg belongs to ("" when it is none).
func doorOf(pkg string) string {
	for _, d := range doors {
		if matches(d, pkg) {
			return strings.TrimSuffix(d, "/...")
		}
	}
	return ""
}

// tierOf is pkg's rank in tiers, -1 when no tier names it.
func tierOf(pkg string) int {
	for i, tier := range tiers {
		if anyMatch(tier, pkg) {
			return i
		}
	}
	return -1
}

// TestDoorsStandSideBySide: no front door imports another, and no package
// imports one of a higher tier.
func TestDoorsStandSideBySide(t *testing.T) {
	graph := imports(t)
	used := map[[2]string]bool{}
	for pkg, deps := range graph {
		rel := strings.TrimPrefix(pkg, module+"/")
		tp := tierOf(pkg)
		if tp < 0 && !matches("internal/archtest", pkg) {
			t.Errorf("%s is in no tier of the house: add it to tiers", rel)
		}
		for _, d := range deps {
			if !matches("...", d) {
				continue
			}
			drel := strings.TrimPrefix(d, module+"/")
			if from, to := doorOf(pkg), doorOf(d); from != "" && to != "" && from != to && from != "cmd" {
				if doorExceptions[[2]string{rel, drel}] {
					used[[2]string{rel, drel}] = true
				} else {
					t.Errorf("%s imports %s: a front door never imports another; move what they share below both", rel, drel)
				}
			}
			if td := tierOf(d); tp >= 0 && td > tp {
				t.Errorf("%s (tier %d) imports %s (tier %d): an arrow running back up the house", rel, tp, drel, td)
			}
		}
	}
	for e := range doorExceptions {
		if !used[e] {
			t.Errorf("doorExceptions names %s -> %s, which no longer exists: remove the entry", e[0], e[1])
		}
	}
}

// TestRulesMatch keeps the patterns honest: a rule that matches nothing
// would pass forever.
func TestRulesMatch(t *testing.T) {
	tests := []struct {
		pattern, pkg string
		want         bool
	}{
		{"cpuset", module + "/cpuset", true},
		{"cpuset", module + "/cpusetx", false},
		{"cmd/...", module + "/cmd/corepin", true},
		{"bench/...", module + "/bench", true},
		{"bench/...", module + "/bench/render", true},
		{"std:os", "os", true},
		{"std:os", "os/exec", false},
		{"...", module + "/topology", true},
		{"...", "fmt", false},
		{"github.com/spf13/cobra", "github.com/spf13/cobra", true},
		{"k8s.io/api/...", "k8s.io/api/core/v1", true},
		{"kube/podmeta", module + "/kube/podmeta", true},
		{"nodecore", module + "/nodecore", true},
	}
	for _, tc := range tests {
		if got := matches(tc.pattern, tc.pkg); got != tc.want {
			t.Errorf("matches(%q, %q) = %v, want %v", tc.pattern, tc.pkg, got, tc.want)
		}
	}
	graph := imports(t)
	for _, r := range rules {
		found := false
		for pkg := range graph {
			if anyMatch(r.from, pkg) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("rule %q applies to no package of the module", r.why)
		}
	}
}
