package bench

import (
	"fmt"
	"html/template"
	"os"
	"path/filepath"
)

// WriteHTML writes r as a self-contained report (no network at view time)
// to dir/index.html and returns the file's path.
func WriteHTML(dir string, r Report) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("writing report: %w", err)
	}
	file := filepath.Join(dir, "index.html")
	f, err := os.CreateTemp(dir, ".index-*.html")
	if err != nil {
		return "", fmt.Errorf("writing report: %w", err)
	}
	defer os.Remove(f.Name())
	if err := reportTemplate.Execute(f, r); err != nil {
		f.Close()
		return "", fmt.Errorf("writing report: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("writing report: %w", err)
	}
	if err := os.Rename(f.Name(), file); err != nil {
		return "", fmt.Errorf("writing report: %w", err)
	}
	return file, nil
}

var reportTemplate = template.Must(template.New("report").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>corepin bench report</title>
<style>body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.2em .6em;text-align:right}
th{background:#f3f3f3}pre{background:#f7f7f7;padding:.8em;overflow:auto}.rec{background:#eef7ee;border-left:4px solid #3a3;padding:.6em 1em}</style>
</head><body>
<h1>corepin bench{{if .Quick}} --quick{{end}}</h1>
<p>{{.Hostname}} &middot; {{.TopologySummary}} &middot; kernel {{.Kernel}} &middot; {{.Driver}} &middot; corepin {{.CorepinVersion}} &middot; {{.GeneratedAt.Format "2006-01-02 15:04 MST"}}</p>
<h2>Topology</h2><pre>{{.TopologyText}}</pre>
{{range .Experiments}}<section id="{{.Name}}"><h2>{{.Name}}: {{.Title}}</h2>
{{if .Error}}<p>error: {{.Error}}</p>{{end}}
{{with .Analysis}}{{if .Recommendation}}<p class="rec"><b>Recommendation:</b> {{.Recommendation}}</p>{{end}}
{{range .Tables}}<h3>{{.Title}}</h3><table><tr>{{range .Columns}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>{{end}}</table>{{if .Note}}<p><small>{{.Note}}</small></p>{{end}}{{end}}{{end}}
</section>{{end}}
<h2>Reproduce</h2><pre>{{range .Commands}}{{.}}
{{end}}</pre>
</body></html>
`))
