package archtest

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// listedLine matches a line of docs/development.md's package list.
var listedLine = regexp.MustCompile("^- `([^`]+)` ")

// TestDevelopmentListsEveryPackage: docs/development.md's "Packages" list
// (scripts/packages.sh prints it) names every package of every module of
// the repository, and no package that is gone.
func TestDevelopmentListsEveryPackage(t *testing.T) {
	doc, err := os.ReadFile("../../docs/development.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Packages\n")
	if !ok {
		t.Fatal("docs/development.md has no \"## Packages\" section")
	}
	var names []string
	for line := range strings.Lines(section) {
		if m := listedLine.FindStringSubmatch(line); m != nil {
			names = append(names, m[1])
		}
	}
	var pkgs []string
	for pkg := range imports(t) {
		pkgs = append(pkgs, strings.TrimPrefix(pkg, module+"/"))
	}
	for _, dir := range modules {
		for pkg := range moduleImports(t, dir) {
			pkgs = append(pkgs, strings.TrimPrefix(pkg, module+"/"))
		}
	}
	for _, p := range pkgs {
		if !slices.Contains(names, p) {
			t.Errorf("docs/development.md does not list package %s: run scripts/packages.sh and paste its list", p)
		}
	}
	for _, n := range names {
		if !slices.Contains(pkgs, n) {
			t.Errorf("docs/development.md lists %s, which is no package of the repository: run scripts/packages.sh", n)
		}
	}
	if len(names) < 40 {
		t.Errorf("found %d packages listed, want every package", len(names))
	}
}
