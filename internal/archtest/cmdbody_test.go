package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// maxCommandBody is the most lines a command's body may take, "about 60"
// as issue 19 puts it (65 leaves a command its flag checks): a command
// parses its flags and calls one function of the package below it that
// does the work (issue 19: "each command calls one core function").
const maxCommandBody = 65

// commandBodies returns, for every cobra command literal under dir, where
// its Run or RunE is and how many lines its body takes. A literal of at
// most six lines that calls a function of its own package delegates to it:
// that function's body is the command's body.
func commandBodies(t *testing.T, dir string) map[string]int {
	t.Helper()
	fset := token.NewFileSet()
	funcs := map[string]*ast.FuncDecl{}
	var files []*ast.File
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != dir {
			return filepath.SkipDir // one package
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		files = append(files, f)
		for _, decl := range f.Decls {
			if fd, ok := decl.(*ast.FuncDecl); ok && fd.Recv == nil && fd.Body != nil {
				funcs[fd.Name.Name] = fd
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	lines := func(n ast.Node) int { return fset.Position(n.End()).Line - fset.Position(n.Pos()).Line + 1 }
	out := map[string]int{}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			kv, ok := n.(*ast.KeyValueExpr)
			if !ok {
				return true
			}
			if id, ok := kv.Key.(*ast.Ident); !ok || (id.Name != "RunE" && id.Name != "Run") {
				return true
			}
			lit, ok := kv.Value.(*ast.FuncLit)
			if !ok {
				return true
			}
			body := lines(lit.Body)
			if body <= 6 {
				ast.Inspect(lit.Body, func(m ast.Node) bool {
					if c, ok := m.(*ast.CallExpr); ok {
						if id, ok := c.Fun.(*ast.Ident); ok && funcs[id.Name] != nil {
							body = lines(funcs[id.Name].Body)
							return false
						}
					}
					return true
				})
			}
			p := fset.Position(kv.Pos())
			out[filepath.Base(p.Filename)+":"+strconv.Itoa(p.Line)] = body
			return true
		})
	}
	return out
}

func TestCommandBodiesAreShort(t *testing.T) {
	bodies := commandBodies(t, "../../cmd/corepin/cli")
	if len(bodies) < 20 {
		t.Fatalf("found %d commands in cmd/corepin/cli, want every corepin command", len(bodies))
	}
	for where, n := range bodies {
		if n > maxCommandBody {
			t.Errorf("cmd/corepin/cli/%s: the command's body is %d lines (at most %d): move the work into the package below that owns it and call one function", where, n, maxCommandBody)
		}
	}
}
