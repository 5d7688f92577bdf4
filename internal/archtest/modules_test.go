package archtest

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// modules are the repository's other Go modules, by directory from the
// root: archtest runs in the main module and lists each with go list.
var modules = []string{"scheduler", "tools", "test/kube", "test/e2evm", "test/e2enode", "test/helm"}

// pkgImports is one package of a module and what it imports: Imports of
// its non-test files, TestImports of its tests (in-package and external).
type pkgImports struct {
	Imports, TestImports []string
}

// moduleImports lists every package of the module in dir (relative to the
// repository's root) with its direct imports.
func moduleImports(t *testing.T, dir string) map[string]pkgImports {
	t.Helper()
	if m, ok := listed[dir]; ok {
		return m
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go toolchain not on PATH")
	}
	cmd := exec.Command(gobin, "list", "-e", "-f",
		`{{.ImportPath}}|{{join .Imports " "}}|{{join .TestImports " "}} {{join .XTestImports " "}}`, "./...")
	cmd.Dir = filepath.Join("..", "..", dir)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list in %s: %v", dir, err)
	}
	m := map[string]pkgImports{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Split(sc.Text(), "|")
		if len(f) == 3 {
			m[f[0]] = pkgImports{Imports: strings.Fields(f[1]), TestImports: strings.Fields(f[2])}
		}
	}
	listed[dir] = m
	return m
}

// listed keeps each module's listing for the tests after the first (they
// run one at a time).
var listed = map[string]map[string]pkgImports{}

// moduleOf is the module pkg belongs to: the longest module path that is
// pkg or a prefix of it ("" for none of the repository's).
func moduleOf(pkg string) string {
	best := ""
	for _, m := range append([]string{""}, modules...) {
		path := module
		if m != "" {
			path += "/" + m
		}
		if (pkg == path || strings.HasPrefix(pkg, path+"/")) && len(path) > len(best) {
			best = path
		}
	}
	return best
}

// isInternal reports whether pkg is, or is under, an internal directory.
func isInternal(pkg string) bool {
	return strings.HasSuffix(pkg, "/internal") || strings.Contains(pkg, "/internal/")
}

// crossInternalForTests are the internal packages of the main module that
// the other modules' tests may import (Go allows any module under the
// repository's path to): the shared test helper, nothing else, and never
// from a non-test file.
var crossInternalForTests = []string{module + "/internal/testutil"}

// schedulerReaches is all the scheduler module's code imports of the main
// module: the allocator's value types, the node view (kube/nodeview, which
// decodes, holds and judges the nodes), the node codec's names and
// discovery (kube/nodestate) and the pod's request (kube/podreq). Never
// plan, nodecore, sim or a door; alloc's state machinery is judged only
// in kube/nodeview (TestNoDoorKeepsAJudge).
var schedulerReaches = []string{"alloc", "cpuset", "topology", "kube/nodeview", "kube/nodestate", "kube/podreq"}

// TestModulesKeepTheirInternals: no module imports another module's
// internal packages (but the shared test helper, in tests), and the
// scheduler module's code reaches the main module only through
// schedulerReaches.
func TestModulesKeepTheirInternals(t *testing.T) {
	for _, dir := range modules {
		graph := moduleImports(t, dir)
		if len(graph) == 0 {
			t.Errorf("go list found no package in module %s", dir)
		}
		for pkg, imp := range graph {
			own := moduleOf(pkg)
			check := func(deps []string, test bool) {
				for _, d := range deps {
					other := moduleOf(d)
					if other == "" || other == own {
						continue
					}
					if isInternal(d) && !(test && slices.Contains(crossInternalForTests, d)) {
						t.Errorf("%s imports %s (test files: %v): another module's internal package; move what it needs out of internal/", pkg, d, test)
					}
					if dir == "scheduler" && !test && other == module && !anyMatch(schedulerReaches, d) {
						t.Errorf("%s imports %s: the scheduler module reaches the main module only through %v (alloc's state machinery through kube/nodeview)", pkg, d, schedulerReaches)
					}
				}
			}
			check(imp.Imports, false)
			check(imp.TestImports, true)
		}
	}
}

// doorJudges are alloc.State's methods that decide a placement: a call of
// one is a judge.
var doorJudges = []string{"Try", "Admit", "Allocate"}

// nodestateJudges are kube/nodestate's functions that build the allocator
// state a node is judged on, or judge a request on it: a door calling one
// keeps a judge of its own beside kube/nodeview's.
var nodestateJudges = []string{"DecodeTopology", "DecodeNUMAFree", "JudgeTopology", "JudgeFree", "JudgeKoord", "Prejudge", "RequestOn", "Refusal"}

// schedulerDoors are the directories of the scheduler doors, which keep no
// judge of their own: kube/nodeview judges for both.
var schedulerDoors = []string{"scheduler/plugin", "kube/extender"}

// judgeExceptions are the scheduler doors' own calls of a judging method
// or function, keyed "dir/file.go function.Method": none since issue 29
// moved both doors' judges into kube/nodeview. An entry goes with its
// call; a new call, or an entry no call needs, fails.
var judgeExceptions = map[string]bool{}

// judgeCalls lists the calls of a doorJudges method (by name: no other
// type a scheduler door uses has one) and of a nodestateJudges function
// (nodestate.Name) in the non-test files of dir, keyed as judgeExceptions
// is.
func judgeCalls(t *testing.T, dir string) []string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join("..", "..", dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in %s: %v", dir, err)
	}
	var out []string
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			name := fd.Name.Name
			if fd.Recv != nil && len(fd.Recv.List) == 1 {
				name = "(" + exprString(fd.Recv.List[0].Type) + ")." + name
			}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				c, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := c.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				pkg, _ := sel.X.(*ast.Ident)
				if slices.Contains(doorJudges, sel.Sel.Name) ||
					pkg != nil && pkg.Name == "nodestate" && slices.Contains(nodestateJudges, sel.Sel.Name) {
					out = append(out, dir+"/"+filepath.Base(path)+" "+name+"."+sel.Sel.Name)
				}
				return true
			})
		}
	}
	return out
}

// exprString names a receiver type: T, *T or T[...].
func exprString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.StarExpr:
		return "*" + exprString(e.X)
	case *ast.IndexExpr:
		return exprString(e.X)
	}
	return "?"
}

// TestNoDoorKeepsAJudge: the scheduler doors (scheduler/plugin,
// kube/extender) call none of alloc.State's judging methods (Try, Admit,
// Allocate) nor kube/nodestate's (nodestateJudges) but the known
// exceptions of issue 29: they judge through kube/nodeview.
func TestNoDoorKeepsAJudge(t *testing.T) {
	used := map[string]bool{}
	for _, dir := range schedulerDoors {
		for _, call := range judgeCalls(t, dir) {
			if judgeExceptions[call] {
				used[call] = true
				continue
			}
			t.Errorf("%s: a scheduler door judges on alloc.State itself; judge through kube/nodeview (issue 29: one judge)", call)
		}
	}
	for e := range judgeExceptions {
		if !used[e] {
			t.Errorf("judgeExceptions names %s, which no longer exists: remove the entry", e)
		}
	}
}

// TestMakeChecksEveryModule: make modules-check (.ci/run's first step)
// loads the modules the Makefile's NESTED_MODULES names, which must be
// the ones archtest reads.
func TestMakeChecksEveryModule(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	for l := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(l, "NESTED_MODULES :="); ok {
			if got := strings.Fields(v); !slices.Equal(got, modules) {
				t.Errorf("the Makefile's NESTED_MODULES are %v, archtest's modules %v: make modules-check must load every module", got, modules)
			}
			return
		}
	}
	t.Error("the Makefile has no NESTED_MODULES := line (make modules-check)")
}

// TestModuleOf keeps moduleOf and isInternal honest: a wrong module would
// let every cross-module import pass.
func TestModuleOf(t *testing.T) {
	tests := []struct {
		pkg, want string
		internal  bool
	}{
		{pkg: module + "/alloc", want: module},
		{pkg: module + "/internal/testutil", want: module, internal: true},
		{pkg: module + "/scheduler/plugin", want: module + "/scheduler"},
		{pkg: module + "/schedulerx", want: module},
		{pkg: module + "/test/kube/kubetest", want: module + "/test/kube"},
		{pkg: module + "/test/e2evm/internal", want: module + "/test/e2evm", internal: true},
		{pkg: "k8s.io/kubernetes/pkg/internal/x", want: "", internal: true},
	}
	for _, tc := range tests {
		if got := moduleOf(tc.pkg); got != tc.want {
			t.Errorf("moduleOf(%q) = %q, want %q", tc.pkg, got, tc.want)
		}
		if got := isInternal(tc.pkg); got != tc.internal {
			t.Errorf("isInternal(%q) = %v, want %v", tc.pkg, got, tc.internal)
		}
	}
}
