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
var frontDoors = []string{"internal/cli", "cmd/...", "agent/...", "kube/...", "bench/..."}

// core are the packages below the front doors, in the order data flows.
var core = []string{"cpuset", "topology", "alloc", "plan", "enforce", "measure", "qos", "store", "proc", "runner", "sim", "workload", "loadgen", "netbench"}

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
	{from: []string{"agent/..."}, to: []string{"bench/...", "internal/cli", "cmd/..."},
		why: "the agent is a front door on the core; the CLI and bench sit beside it, not under it"},
	{from: []string{"bench/..."}, to: []string{"std:os/exec"},
		why: "experiments start every process through proc/runner, never os/exec"},
	{from: []string{"kube/podmeta"}, to: append([]string{"std:os", "std:os/exec", "std:io/fs", "std:net", "std:net/http", "std:syscall",
		"k8s.io/api/...", "k8s.io/apimachinery/...", "github.com/containerd/nri/...", "agent/...", "internal/cli", "cmd/...", "bench/..."}, core[3:]...),
		why: "podmeta reads pod metadata from plain values: no I/O, no Kubernetes or NRI types, nothing beyond alloc, so the extender and the NRI plugin share it"},
	{from: core, to: []string{"std:flag", "github.com/spf13/cobra"},
		why: "command lines are parsed in internal/cli only"},
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
