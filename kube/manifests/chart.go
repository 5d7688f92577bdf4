// Package manifests renders and checks corepin's Kubernetes deployment:
// the Helm chart under deploy/helm/corepin, whose templates keep to Go
// text/template syntax plus Helm's `quote`, so that they render the same
// here as in Helm, and the plain manifests under deploy/kubernetes, which
// are the chart rendered with its default values. It does not talk to a
// cluster. test/helm holds both claims to Helm's own rendering (helm
// template from helm.sh/helm/v4) for every combination of the chart's
// documented switches; lint, schema and the API server's verdict are
// checked there too.
package manifests

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"
	"text/template"

	"gopkg.in/yaml.v3"
)

// ErrChart means a chart can not be read or rendered.
var ErrChart = errors.New("bad chart")

// MaxChartFile bounds each file of a chart.
const MaxChartFile = 256 << 10

// Release is what Helm calls .Release.
type Release struct {
	Name      string
	Namespace string
}

// funcs are the Helm functions the templates may use, with Helm's meaning.
var funcs = template.FuncMap{
	// quote is sprig's: each argument as a Go-quoted string, joined by spaces.
	"quote": func(vs ...any) string {
		out := make([]string, 0, len(vs))
		for _, v := range vs {
			if v != nil {
				out = append(out, fmt.Sprintf("%q", fmt.Sprint(v)))
			}
		}
		return strings.Join(out, " ")
	},
}

// Render renders the chart at the root of fsys (Chart.yaml, values.yaml,
// templates/*.yaml) with values.yaml merged under overrides (top-level
// keys replace, maps merge), and returns one stream of YAML documents in
// template-name order. Missing values are errors, as with Helm's
// --strict rendering.
func Render(fsys fs.FS, rel Release, overrides map[string]any) ([]byte, error) {
	read := func(name string) ([]byte, error) {
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrChart, err)
		}
		if len(b) > MaxChartFile {
			return nil, fmt.Errorf("%w: %s is larger than %d bytes", ErrChart, name, MaxChartFile)
		}
		return b, nil
	}
	var chart struct {
		APIVersion string `yaml:"apiVersion"`
		Name       string `yaml:"name"`
		Version    string `yaml:"version"`
		AppVersion string `yaml:"appVersion"`
	}
	b, err := read("Chart.yaml")
	if err != nil {
		return nil, err
	}
	if err := yaml.Unmarshal(b, &chart); err != nil || chart.APIVersion != "v2" || chart.Name == "" || chart.Version == "" {
		return nil, fmt.Errorf("%w: Chart.yaml needs apiVersion v2, name and version (%v)", ErrChart, err)
	}
	values := map[string]any{}
	if b, err = read("values.yaml"); err != nil {
		return nil, err
	}
	if err := yaml.Unmarshal(b, &values); err != nil {
		return nil, fmt.Errorf("%w: values.yaml: %v", ErrChart, err)
	}
	merge(values, overrides)
	names, err := fs.Glob(fsys, "templates/*.yaml")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrChart, err)
	}
	slices.Sort(names)
	data := map[string]any{
		"Values":  values,
		"Release": map[string]any{"Name": rel.Name, "Namespace": rel.Namespace, "Service": "Helm"},
		"Chart":   map[string]any{"Name": chart.Name, "Version": chart.Version, "AppVersion": chart.AppVersion},
	}
	var out bytes.Buffer
	for _, name := range names {
		b, err := read(name)
		if err != nil {
			return nil, err
		}
		t, err := template.New(path.Base(name)).Funcs(funcs).Option("missingkey=error").Parse(string(b))
		if err != nil {
			return nil, fmt.Errorf("%w: parsing %s: %v", ErrChart, name, err)
		}
		var doc bytes.Buffer
		if err := t.Execute(&doc, data); err != nil {
			return nil, fmt.Errorf("%w: rendering %s: %v", ErrChart, name, err)
		}
		if strings.TrimSpace(doc.String()) == "" {
			continue
		}
		fmt.Fprintf(&out, "---\n# Source: %s/%s\n%s", chart.Name, name, strings.TrimLeft(doc.String(), "\n"))
		if !bytes.HasSuffix(out.Bytes(), []byte("\n")) {
			out.WriteByte('\n')
		}
	}
	return out.Bytes(), nil
}

// merge merges src into dst: maps merge key by key, anything else replaces.
func merge(dst, src map[string]any) {
	for _, k := range slices.Sorted(maps.Keys(src)) {
		sv := src[k]
		dm, dok := dst[k].(map[string]any)
		sm, sok := sv.(map[string]any)
		if dok && sok {
			merge(dm, sm)
			continue
		}
		dst[k] = sv
	}
}

// Documents splits a YAML stream into its non-empty documents.
func Documents(stream []byte) [][]byte {
	var docs [][]byte
	for _, d := range bytes.Split(append([]byte("\n"), stream...), []byte("\n---")) {
		keep := false
		for _, line := range strings.Split(string(d), "\n") {
			if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
				keep = true
				break
			}
		}
		if keep {
			docs = append(docs, bytes.TrimLeft(d, "\n"))
		}
	}
	return docs
}
