package render

import (
	"fmt"
	"github.com/corepin/corepin/bench"
	"html/template"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/corepin/corepin/runner"
	"github.com/corepin/corepin/topology"
)

// WriteHTML writes r as a self-contained report (no network at view time)
// to dir/index.html and returns the file's path. The file is replaced
// atomically: a reader sees the old report or the new one, never half.
func WriteHTML(dir string, r bench.Report, o Options) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("writing report: %w", err)
	}
	file := filepath.Join(dir, "index.html")
	f, err := os.CreateTemp(dir, ".index-*.html")
	if err != nil {
		return "", fmt.Errorf("writing report: %w", err)
	}
	defer os.Remove(f.Name())
	if err := RenderHTML(f, r, o); err != nil {
		f.Close()
		return "", fmt.Errorf("writing report: %w", err)
	}
	if err := f.Chmod(0o644); err != nil {
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

// RenderHTML writes r as one HTML document: machine facts, a table of
// contents, the topology map, and per experiment its recommendation,
// charts (inline SVG), tables and the command that reproduces it. It uses
// no scripts and nothing outside the document: no fonts, images, styles
// or links to fetch.
func RenderHTML(w io.Writer, r bench.Report, o Options) error {
	return reportTemplate.Execute(w, newHTMLReport(r, o))
}

// Options tell the report what it cannot know from the run: which flags
// of `corepin bench` take a value ("--spec", "-o"), as the CLI defines
// them, so that the command re-running one experiment does not take a
// flag's value for an experiment name.
type Options struct {
	ValueFlags []string
}

// htmlReport is the view of a Report the template renders.
type htmlReport struct {
	bench.Report
	Facts    []fact
	CPUs     string
	Sections []htmlSection
	// Regenerate is the `corepin report` command for this run.
	Regenerate string
}

type fact struct{ Name, Value string }

type htmlSection struct {
	bench.ExperimentReport
	ID      string
	Charts  []htmlChart
	Runs    int
	Failed  int
	Repeats int
	Command string
}

type htmlChart struct {
	ID    string
	Kind  string
	Title string
	// SVG comes from RenderChart only; it is the one value the template
	// does not escape.
	SVG template.HTML
	// Hint says how to read the chart; Note why it is a placeholder.
	Hint, Note string
}

// chartHint says how to read a chart of kind, for its caption.
func chartHint(c bench.Chart) string {
	switch c.Kind {
	case bench.ChartBox:
		return "Boxes span the middle half of the repeats with a line at the median; whiskers reach the furthest repeat within 1.5 box heights, circles mark repeats beyond."
	case bench.ChartHeatmap:
		return "Colour and number give each cell's value (blue low, red high); n/a: not measured."
	case bench.ChartCDF:
		h := "Each line gives the percentage of requests served within a latency: further left is faster, and the top of the curve is the tail."
		if c.LogX {
			h += " Latency on a logarithmic scale."
		}
		return h
	}
	return c.Title
}

func newHTMLReport(r bench.Report, o Options) htmlReport {
	v := htmlReport{Report: r}
	mode := "full"
	if r.Quick {
		mode = "quick"
	}
	v.Facts = []fact{
		{"Host", r.Hostname},
		{"Machine", r.TopologySummary},
		{"Kernel", r.Kernel},
		{"Enforcement", r.Driver},
		{"corepin", r.CorepinVersion},
		{"Run", runLabel(r, mode)},
	}
	v.CPUs = cpuFacts(r.Topology)
	if r.RunID > 0 {
		v.Regenerate = fmt.Sprintf("corepin report --run %d", r.RunID)
	}
	names := make([]string, 0, len(r.Experiments))
	for _, e := range r.Experiments {
		names = append(names, e.Name)
	}
	for i, e := range r.Experiments {
		s := htmlSection{ExperimentReport: e, ID: "exp-" + anchor(e.Name, i)}
		for _, p := range e.Points {
			s.Runs += len(p.Repeats)
			s.Failed += len(p.Errors)
			s.Repeats = max(s.Repeats, len(p.Repeats)+len(p.Errors))
		}
		for j, c := range e.Analysis.Charts {
			rc := RenderChart(c)
			s.Charts = append(s.Charts, htmlChart{
				ID:    fmt.Sprintf("%s-chart-%d", s.ID, j+1),
				Kind:  c.Kind,
				Title: c.Title,
				SVG:   template.HTML(rc.SVG),
				Hint:  chartHint(c),
				Note:  rc.Note,
			})
		}
		s.Command = experimentCommand(r.Params.Argv, o.ValueFlags, e.Name, names, r.Quick)
		v.Sections = append(v.Sections, s)
	}
	return v
}

func runLabel(r bench.Report, mode string) string {
	var parts []string
	if r.RunID > 0 {
		parts = append(parts, fmt.Sprintf("#%d", r.RunID))
	}
	if !r.GeneratedAt.IsZero() {
		parts = append(parts, r.GeneratedAt.Format("2006-01-02 15:04:05 MST"))
	}
	parts = append(parts, mode)
	return strings.Join(parts, ", ")
}

// cpuFacts counts the logical CPUs corepin may use out of those online.
func cpuFacts(d topology.Doc) string {
	if len(d.CPUs) == 0 {
		return ""
	}
	online, allowed := 0, 0
	for _, c := range d.CPUs {
		if c.Online {
			online++
			if c.Allowed {
				allowed++
			}
		}
	}
	return fmt.Sprintf("%d of %d online logical CPUs in corepin's cpuset", allowed, online)
}

// anchor makes an HTML id from an experiment name.
func anchor(name string, i int) string {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	if b.Len() == 0 {
		return strconv.Itoa(i + 1)
	}
	return b.String()
}

// experimentCommand is the command that re-runs one experiment as the
// report's run did: the run's own `corepin bench` argv with its flags kept
// and its experiment names replaced by name (valueFlags are the flags
// whose next argument is their value, not a name). Without a recorded
// bench argv it is `corepin bench [--quick] name`.
func experimentCommand(argv, valueFlags []string, name string, names []string, quick bool) string {
	if len(argv) >= 2 && filepath.Base(argv[0]) == "corepin" && argv[1] == "bench" {
		out := slices.Clone(argv[:2])
		for i := 2; i < len(argv); i++ {
			a := argv[i]
			if strings.HasPrefix(a, "-") {
				out = append(out, a)
				if slices.Contains(valueFlags, a) && i+1 < len(argv) {
					out = append(out, argv[i+1])
					i++
				}
				continue
			}
			if slices.Contains(names, a) || slices.Contains(bench.Order, a) {
				continue // an experiment name: replaced below
			}
			out = append(out, a)
		}
		return runner.ShellJoin(append(out, name))
	}
	if quick {
		return runner.ShellJoin([]string{"corepin", "bench", "--quick", name})
	}
	return runner.ShellJoin([]string{"corepin", "bench", name})
}

var reportTemplate = template.Must(template.New("report").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>corepin bench report{{with .Hostname}}: {{.}}{{end}}</title>
<style>
:root{--fg:#1d1d1f;--muted:#666;--line:#d8d8d8;--bg2:#f6f7f8}
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,"Segoe UI","Liberation Sans",Arial,sans-serif;color:var(--fg);max-width:1380px;margin:0 auto;padding:1.5em 1.2em 4em;line-height:1.45}
h1{font-size:1.7em;margin:.2em 0 .4em}h2{font-size:1.35em;margin:0 0 .5em;padding-top:.4em;border-top:2px solid var(--line)}
h3{font-size:1.05em;margin:1.2em 0 .3em}
section{margin:2.2em 0}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:.15em 1.2em;margin:0;background:var(--bg2);padding:.8em 1em;border-radius:6px}
dl.facts dt{color:var(--muted)}dl.facts dd{margin:0}
nav.toc{margin:1.2em 0;padding:.6em 1em;border:1px solid var(--line);border-radius:6px}
nav.toc ol{margin:.3em 0;padding-left:1.4em}nav.toc a{text-decoration:none;color:#1a5fb4}nav.toc a:hover{text-decoration:underline}
.err{color:#a51d2d}
table{border-collapse:collapse;margin:.4em 0;font-variant-numeric:tabular-nums;font-size:.93em}
td,th{border:1px solid var(--line);padding:.22em .65em;text-align:right}
th{background:var(--bg2);font-weight:600}td:first-child,th:first-child{text-align:left}
caption{text-align:left;font-weight:600;padding:.2em 0}
.note{color:var(--muted);font-size:.9em;margin:.2em 0 1em}
pre{background:var(--bg2);padding:.8em 1em;overflow:auto;border-radius:6px;font-size:.88em;line-height:1.3}
pre.cmd{background:#1f2328;color:#e6edf3}
.rec{background:#eef7ee;border-left:5px solid #2f9e44;padding:.7em 1em;margin:.8em 0;border-radius:0 6px 6px 0}
.rec.none{background:#fff8e6;border-left-color:#e8a500}
.error{background:#fdecec;border-left:5px solid #c01c28;padding:.7em 1em;margin:.8em 0;border-radius:0 6px 6px 0}
.meta{color:var(--muted);font-size:.9em;margin:-.3em 0 .6em}
.charts{display:flex;flex-wrap:wrap;gap:1em}
figure.chart{margin:0;flex:0 0 auto;width:calc(640px + .8em + 2px);max-width:100%;border:1px solid var(--line);border-radius:6px;padding:.4em;background:#fff}
figure.chart svg{display:block;max-width:100%;height:auto}
figure.chart svg text{font-family:"Liberation Sans",Arimo,Arial,Helvetica,sans-serif !important}
figcaption{font-size:.88em;color:var(--muted);padding:.2em .3em 0}
@media print{nav.toc{display:none}section{break-inside:avoid-page}}
</style>
</head><body>
<header>
<h1>corepin bench report{{if .Quick}} <small>(--quick)</small>{{end}}</h1>
<dl class="facts">
{{range .Facts}}{{if .Value}}<dt>{{.Name}}</dt><dd>{{.Value}}</dd>
{{end}}{{end}}{{with .CPUs}}<dt>CPUs</dt><dd>{{.}}</dd>
{{end}}</dl>
</header>
<nav class="toc" aria-label="Contents"><b>Contents</b>
<ol>
<li><a href="#topology">Topology</a></li>
{{range .Sections}}<li><a href="#{{.ID}}">{{.Name}}</a>{{with .Title}}: {{.}}{{end}}{{if .Error}} <span class="err">(error)</span>{{end}}</li>
{{end}}<li><a href="#reproduce">Reproduce</a></li>
</ol>
</nav>
<main>
<section id="topology"><h2>Topology</h2>
{{with .TopologySummary}}<p>{{.}}</p>{{end}}
{{if .TopologyText}}<pre class="topo">{{.TopologyText}}</pre>{{else}}<p class="note">No topology map recorded for this run.</p>{{end}}
{{with .Topology.Warnings}}<ul class="note">{{range .}}<li>{{.}}</li>{{end}}</ul>{{end}}
</section>
{{range .Sections}}<section id="{{.ID}}" class="experiment" data-experiment="{{.Name}}">
<h2>{{.Name}}{{with .Title}}: {{.}}{{end}}</h2>
{{with .Analysis.Notice}}<div class="error notice"><b>Note:</b> {{.}}</div>{{end}}
<p class="meta">{{len .Points}} points, {{.Runs}} measured runs{{if .Repeats}} (up to {{.Repeats}} repeats each){{end}}{{if .Failed}}, <span class="err">{{.Failed}} failed</span>{{end}}{{if .Elapsed}}, {{printf "%.0f" .Elapsed}} s{{end}}</p>
{{if .Error}}<div class="error"><b>Error:</b> {{.Error}}</div>{{end}}
{{with .Analysis}}{{if .Recommendation}}<div class="rec"><b>Recommendation:</b> {{.Recommendation}}</div>{{else}}<div class="rec none">No recommendation: not enough data.</div>{{end}}{{end}}
{{if .Charts}}<div class="charts">
{{range .Charts}}<figure class="chart" id="{{.ID}}" data-kind="{{.Kind}}">
{{.SVG}}
<figcaption>{{.Hint}}{{with .Note}} ({{.}}){{end}}</figcaption>
</figure>
{{end}}</div>{{end}}
{{range .Analysis.Tables}}<h3>{{.Title}}</h3>
<table><tr>{{range .Columns}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table>{{with .Note}}<p class="note">{{.}}</p>{{end}}
{{end}}
<h3>Reproduce</h3>
<pre class="cmd">{{.Command}}</pre>
</section>
{{end}}
<section id="reproduce"><h2>Reproduce</h2>
{{if .Commands}}<p>This run:</p>
<pre class="cmd">{{range .Commands}}{{.}}
{{end}}</pre>{{else}}<p class="note">The run recorded no command.</p>{{end}}
{{with .Regenerate}}<p>Regenerate this report from the results database:</p>
<pre class="cmd">{{.}}</pre>{{end}}
</section>
</main>
</body></html>
`))
