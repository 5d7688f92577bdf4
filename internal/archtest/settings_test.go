package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// settingsType is the one type of a node's allocator settings (engine,
// kubelet options, reserved CPUs, default topology policy, forced bind
// and NUMA strategy), with the one rule that puts them on a request.
const settingsType = "alloc.NodeSettings"

// wireForms are the other types that carry an engine, options and a
// topology policy: forms the settings take on a wire (a file, an
// annotation, a report), each converted to or from settingsType by a
// function whose signature names both. A new node setting is added to
// settingsType and to the conversions of these, nowhere else.
var wireForms = map[string]string{
	"kube/nodestate.Allocator": "the node annotation corepin.io/allocator and the NRT attributes",
	"sim.SettingsDoc":          "the settings as simulate's reports show them (JSON)",
	"agent.Config":             "the agent's and NRI plugin's YAML",
	"nodecore.SharedConfig":    "the settings the agent and the NRI plugin share with corepin run (the state file)",
}

// TestOneNodeSettingsType lists the struct types of the module that carry
// an engine, kubelet options and a topology policy (fields of types
// alloc.Policy and alloc.TopologyPolicy, or string fields named Policy
// and TopologyPolicy, with a []string field named Options or
// PolicyOptions) and finds
// settingsType and the wireForms only; and each wire form has a function
// converting it to or from settingsType.
func TestOneNodeSettingsType(t *testing.T) {
	files := moduleFiles(t)
	var found []string
	for _, f := range files {
		for _, d := range f.ast.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.TYPE {
				continue
			}
			for _, sp := range g.Specs {
				ts := sp.(*ast.TypeSpec)
				if st, ok := ts.Type.(*ast.StructType); ok && carriesSettings(f.pkg, st) {
					found = append(found, f.pkg+"."+ts.Name.Name)
				}
			}
		}
	}
	slices.Sort(found)
	found = slices.Compact(found)
	want := []string{settingsType}
	for w := range wireForms {
		want = append(want, w)
	}
	slices.Sort(want)
	for _, name := range found {
		if !slices.Contains(want, name) {
			t.Errorf("%s carries an engine, options and a topology policy: use %s (or, for a wire form, list it in wireForms with its conversion)", name, settingsType)
		}
	}
	for _, name := range want {
		if !slices.Contains(found, name) {
			t.Errorf("%s is listed but no longer carries an engine, options and a topology policy: remove it from wireForms", name)
		}
	}
	for w := range wireForms {
		if len(converters(files, w)) == 0 {
			t.Errorf("wire form %s (%s) has no function converting it to or from %s", w, wireForms[w], settingsType)
		}
	}
}

// carriesSettings reports whether st (declared in package pkg) has an
// engine, options and a topology policy among its own fields.
func carriesSettings(pkg string, st *ast.StructType) bool {
	var engine, options, topo bool
	for _, f := range st.Fields.List {
		typ := typeName(pkg, f.Type)
		for _, n := range f.Names {
			switch {
			case typ == "alloc.Policy", n.Name == "Policy" && typ == "string":
				engine = true
			case typ == "alloc.TopologyPolicy", n.Name == "TopologyPolicy" && typ == "string":
				topo = true
			case strings.HasSuffix(n.Name, "Options") && isStrings(f.Type):
				options = true
			}
		}
	}
	return engine && options && topo
}

// isStrings reports whether e is []string.
func isStrings(e ast.Expr) bool {
	a, ok := e.(*ast.ArrayType)
	if !ok || a.Len != nil {
		return false
	}
	id, ok := a.Elt.(*ast.Ident)
	return ok && id.Name == "string"
}

// typeName names type expression e of package pkg as "pkg.Name" ("string"
// for a predeclared type, "" for other expressions). Import names are
// taken to be the last element of the import path, as corepin writes them.
func typeName(pkg string, e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		if ast.IsExported(e.Name) {
			return pkg + "." + e.Name
		}
		if e.Name == "string" {
			return "string"
		}
	case *ast.SelectorExpr:
		if x, ok := e.X.(*ast.Ident); ok {
			return x.Name + "." + e.Sel.Name
		}
	case *ast.StarExpr:
		return typeName(pkg, e.X)
	}
	return ""
}

// converters lists the functions and methods whose signature (receiver,
// parameters, results) names both wire form w and settingsType.
func converters(files []goFile, w string) []string {
	wpkg, wname, _ := strings.Cut(w, ".")
	var out []string
	for _, f := range files {
		for _, d := range f.ast.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			var names []string
			lists := []*ast.FieldList{fd.Recv, fd.Type.Params, fd.Type.Results}
			for _, l := range lists {
				if l == nil {
					continue
				}
				for _, fl := range l.List {
					ast.Inspect(fl.Type, func(n ast.Node) bool {
						if e, ok := n.(ast.Expr); ok {
							if name := typeName(f.pkg, e); name != "" {
								names = append(names, name)
							}
						}
						return true
					})
				}
			}
			// A wire form named from another package is pkg.Name with
			// the last element of its path.
			local := wpkg + "." + wname
			if f.pkg != wpkg {
				local = wpkg[strings.LastIndex(wpkg, "/")+1:] + "." + wname
			}
			if slices.Contains(names, local) && (slices.Contains(names, settingsType) || f.pkg == "alloc" && slices.Contains(names, "alloc.NodeSettings")) {
				out = append(out, f.pkg+"."+fd.Name.Name)
			}
		}
	}
	return out
}

// goFile is a parsed non-test file, its package's path in the module and
// its base name.
type goFile struct {
	pkg, name string
	ast       *ast.File
}

// moduleFiles parses every non-test .go file of the module (not its
// testdata, not the nested modules under it).
func moduleFiles(t *testing.T) []goFile {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("finding the module root: %v", err)
	}
	fset := token.NewFileSet()
	var out []goFile
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && path != root {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		out = append(out, goFile{pkg: filepath.ToSlash(rel), name: filepath.Base(path), ast: f})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
