package archtest

import (
	"go/ast"
	"path"
	"slices"
	"strconv"
	"testing"
)

// fsWriters are the names package os gives to what changes a file
// system or opens a root to change it in (os.Root, os.OpenRoot,
// os.OpenInRoot): with the raw system calls (packages syscall and
// golang.org/x/sys/unix), the ways a package could write a cgroup
// without package enforce.
var fsWriters = []string{"Chmod", "Chown", "CopyFS", "Create", "CreateTemp", "Lchown", "Link", "Mkdir", "MkdirAll",
	"MkdirTemp", "OpenFile", "OpenInRoot", "OpenRoot", "Remove", "RemoveAll", "Rename", "Root", "Symlink", "Truncate", "WriteFile"}

// noCgroupWriters are the packages that leave every cgroup write to
// package enforce (issue 29: one cgroup writer), with their files that
// may write other files all the same: kube/nri's info.go keeps the
// containers' info files in Options.InfoDir, which is no cgroup mount.
var noCgroupWriters = map[string][]string{
	"kube/nri": {"info.go"},
}

// TestOneCgroupWriter: the packages of noCgroupWriters call no function
// of package os that writes (fsWriters), name no os.Root and make no
// system call of their own outside their exempt files, so their cgroup
// writes (the NRI plugin's idle parent) go through package enforce.
func TestOneCgroupWriter(t *testing.T) {
	seen := map[string]int{}
	for _, f := range moduleFiles(t) {
		exempt, ok := noCgroupWriters[f.pkg]
		if !ok {
			continue
		}
		seen[f.pkg]++
		if slices.Contains(exempt, f.name) {
			continue
		}
		imported := map[string]string{} // the name a file gives it -> import path
		for _, imp := range f.ast.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			if err != nil || (p != "os" && p != "syscall" && p != "golang.org/x/sys/unix") {
				continue
			}
			name := path.Base(p)
			if imp.Name != nil {
				name = imp.Name.Name
			}
			imported[name] = p
		}
		ast.Inspect(f.ast, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			id, ok := sel.X.(*ast.Ident)
			if !ok {
				return true
			}
			if p, ok := imported[id.Name]; ok && (p != "os" || slices.Contains(fsWriters, sel.Sel.Name)) {
				t.Errorf("%s/%s uses %s.%s: write cgroups through package enforce (issue 29: one cgroup writer), or, for a file that is no cgroup, write it from a file noCgroupWriters exempts", f.pkg, f.name, p, sel.Sel.Name)
			}
			return true
		})
	}
	for pkg := range noCgroupWriters {
		if seen[pkg] == 0 {
			t.Errorf("found no file of package %s: update noCgroupWriters", pkg)
		}
	}
}
