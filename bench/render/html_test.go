package render

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/corepin/corepin/bench"
	"github.com/corepin/corepin/experiment"
	"image"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// nanSentinel stands for NaN in testdata/report/sample.json: JSON has no
// NaN, and the experiments put NaN in heat map cells they did not measure.
const nanSentinel = "NaN"

// loadSample reads testdata/report/sample.json, a report of all five
// experiments with realistic values and every chart kind.
func loadSample(t *testing.T) bench.Report {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "report", "sample.json"))
	if err != nil {
		t.Fatal(err)
	}
	// The bare token NaN (as Python writes it) becomes a number no chart
	// uses, mapped back to NaN after decoding.
	const stand = -1.2345e300
	data = regexp.MustCompile(`\b`+nanSentinel+`\b`).ReplaceAll(data, []byte(fmt.Sprint(stand)))
	// Point has no UnmarshalJSON (it keeps key order, which a map loses):
	// the points are decoded apart, with ParsePoint.
	var raw struct {
		Experiments []struct {
			Points []struct {
				Point   json.RawMessage      `json:"point"`
				Repeats []experiment.Metrics `json:"repeats"`
				Errors  []string             `json:"errors"`
			} `json:"points"`
		} `json:"experiments"`
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatalf("decoding sample.json: %v", err)
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("decoding sample.json: %v", err)
	}
	exps, _ := doc["experiments"].([]any)
	for _, e := range exps {
		delete(e.(map[string]any), "points")
	}
	stripped, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var r bench.Report
	if err := json.Unmarshal(stripped, &r); err != nil {
		t.Fatalf("decoding sample.json: %v", err)
	}
	for i, e := range raw.Experiments {
		for _, p := range e.Points {
			pt, err := experiment.ParsePoint(p.Point)
			if err != nil {
				t.Fatal(err)
			}
			r.Experiments[i].Points = append(r.Experiments[i].Points, experiment.PointResult{Point: pt, Repeats: p.Repeats, Errors: p.Errors})
		}
	}
	fix := func(xs []float64) {
		for i := range xs {
			if xs[i] == stand {
				xs[i] = math.NaN()
			}
		}
	}
	for _, e := range r.Experiments {
		for _, c := range e.Analysis.Charts {
			for _, row := range c.Grid {
				fix(row)
			}
			for _, s := range c.Series {
				fix(s.X)
				fix(s.Y)
				for _, v := range s.Values {
					fix(v)
				}
			}
		}
	}
	return r
}

func sampleCharts(r bench.Report) []bench.Chart {
	var out []bench.Chart
	for _, e := range r.Experiments {
		out = append(out, e.Analysis.Charts...)
	}
	return out
}

// allowedURLs are the only URLs a report may contain: the SVG and XLink
// namespace names, which identify and are never fetched.
var allowedURLs = []string{"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"}

var urlRE = regexp.MustCompile(`(?i)(https?:|ftp:|file:|//[a-z0-9.-]+\.[a-z]{2,})[^\s"'<>)]*`)

// checkSelfContained fails t if doc refers to anything a browser would
// fetch: URLs other than the namespace names, CSS url() or @import, script
// or link elements with a source, or src attributes.
func checkSelfContained(t *testing.T, doc string) {
	t.Helper()
	for _, u := range urlRE.FindAllString(doc, -1) {
		if !slices.Contains(allowedURLs, u) {
			t.Errorf("document refers to %q", u)
		}
	}
	lower := strings.ToLower(doc)
	for _, bad := range []string{"url(", "@import", "<link", "<script", " src=", "<img", "<iframe", "<object", "<embed", "xlink:href", "@font-face"} {
		if strings.Contains(lower, bad) {
			i := strings.Index(lower, bad)
			t.Errorf("document contains %q: ...%s...", bad, doc[max(0, i-60):min(len(doc), i+60)])
		}
	}
}

func TestWriteHTMLSample(t *testing.T) {
	r := loadSample(t)
	charts := sampleCharts(r)
	kinds := map[string]int{}
	for _, c := range charts {
		kinds[c.Kind]++
	}
	for _, k := range []string{bench.ChartBox, bench.ChartLine, bench.ChartHeatmap, bench.ChartCDF, bench.ChartBar} {
		if kinds[k] == 0 {
			t.Fatalf("sample.json has no %s chart; it must exercise every kind", k)
		}
	}
	// A hostile value in every kind of text the report prints.
	const evil = `<script>alert(1)</script>`
	r.Experiments[0].Analysis.Tables[0].Rows[0][0] = evil
	r.Experiments[1].Analysis.Recommendation += " " + evil
	r.Hostname = evil
	r.Experiments[2].Analysis.Charts[0].Title = evil

	file, err := WriteHTML(t.TempDir(), r, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	checkSelfContained(t, doc)
	if !strings.Contains(doc, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Errorf("report lacks the escaped table cell &lt;script&gt;...")
	}

	// Every chart is one figure holding one inline SVG; none is a
	// placeholder, since the sample has data for all.
	figRE := regexp.MustCompile(`(?s)<figure class="chart" id="[^"]+" data-kind="([a-z]+)">\s*(<svg .*?</svg>)\s*<figcaption>(.*?)</figcaption>`)
	figs := figRE.FindAllStringSubmatch(doc, -1)
	if len(figs) != len(charts) {
		t.Fatalf("report has %d chart figures, want %d", len(figs), len(charts))
	}
	for i, f := range figs {
		if f[1] != charts[i].Kind {
			t.Errorf("figure %d data-kind=%q, want %q", i, f[1], charts[i].Kind)
		}
		checkSVG(t, f[2])
		if strings.Contains(f[3], "no data") || strings.Contains(f[3], "could not draw") {
			t.Errorf("figure %d (%s) is a placeholder: %s", i, charts[i].Title, f[3])
		}
	}
	if n := strings.Count(doc, "<svg "); n != len(charts) {
		t.Errorf("report has %d <svg> elements, want %d", n, len(charts))
	}

	for _, want := range []string{
		"Recommendation:", r.Experiments[3].Analysis.Recommendation, // colocation
		`href="#exp-oversubscription"`, `id="exp-oversubscription"`, // contents and sections
		"NUMA node 7", // topology map
		"corepin bench --repeats 5 --seed 42\n",
		"corepin bench --repeats 5 --seed 42 concurrency</pre>", // per experiment
		"corepin report --run 7",
		"6.1.0-41-amd64", "cgroup-v1",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

func TestWriteHTMLEmpty(t *testing.T) {
	file, err := WriteHTML(filepath.Join(t.TempDir(), "new", "dir"), bench.Report{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	checkSelfContained(t, string(b))
	if !strings.Contains(string(b), "The run recorded no command.") {
		t.Errorf("empty report does not say it has no command")
	}
}

func TestExperimentCommand(t *testing.T) {
	names := []string{"concurrency", "threads"}
	tests := []struct {
		name  string
		argv  []string
		quick bool
		want  string
	}{
		{name: "flags kept, names replaced", argv: []string{"corepin", "bench", "--quick", "concurrency", "threads", "--repeats", "7"}, want: "corepin bench --quick --repeats 7 threads"},
		{name: "a flag value that is an experiment name stays", argv: []string{"corepin", "bench", "--spec", "threads", "concurrency"}, want: "corepin bench --spec threads threads"},
		{name: "words that need quoting", argv: []string{"/usr/local/bin/corepin", "bench", "--spec", "my spec.yaml", "--db=a b", "--seed=3"}, want: `/usr/local/bin/corepin bench --spec 'my spec.yaml' '--db=a b' --seed=3 threads`},
		{name: "no bench command", argv: []string{"make", "bench"}, quick: true, want: "corepin bench --quick threads"},
		{name: "nothing recorded", want: "corepin bench threads"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := experimentCommand(tc.argv, []string{"--spec", "--repeats", "--db", "--seed"}, "threads", names, tc.quick); got != tc.want {
				t.Errorf("experimentCommand(%q) = %q, want %q", tc.argv, got, tc.want)
			}
		})
	}
}

// chromium returns the path of a Chromium binary, or skips t.
func chromium(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Skip("skipping the headless browser test: no /usr/bin/chromium (Debian: apt-get install chromium)")
	return ""
}

// runChromium runs Chromium headless on file with extra flags, in its own
// process group, killing the whole group when ctx ends or when Chromium
// exits (it may leave helper processes behind).
func runChromium(ctx context.Context, bin, file string, extra ...string) ([]byte, error) {
	profile, err := os.MkdirTemp("", "corepin-chromium-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(profile)
	args := append([]string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--hide-scrollbars", "--user-data-dir=" + profile,
	}, extra...)
	args = append(args, "file://"+file)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("chromium %s: timed out: %w\n%s", strings.Join(extra, " "), ctx.Err(), tail(stderr.String()))
	}
	if err != nil && !errors.Is(err, exec.ErrWaitDelay) {
		return nil, fmt.Errorf("chromium %s: %w\n%s", strings.Join(extra, " "), err, tail(stderr.String()))
	}
	return stdout.Bytes(), nil
}

func tail(s string) string {
	if len(s) > 2000 {
		return "..." + s[len(s)-2000:]
	}
	return s
}

// probeScript measures, after layout, every chart figure's SVG as the
// browser drew it, and writes the result into the DOM for --dump-dom. It
// goes into the test's copy of the report only: the report has no script.
const probeScript = `<script>
window.addEventListener("load", () => {
  const out = [];
  for (const f of document.querySelectorAll("figure.chart")) {
    const s = f.querySelector("svg");
    const r = s ? s.getBoundingClientRect() : {width: 0, height: 0};
    const shapes = s ? s.querySelectorAll("path,rect,text").length : 0;
    out.push([f.dataset.kind, Math.round(r.width), Math.round(r.height), shapes].join(":"));
  }
  const pre = document.createElement("pre");
  pre.id = "probe";
  pre.textContent = "PRO" + "BE[" + out.join(" ") + "]PRO" + "BE";
  document.body.appendChild(pre);
});
</script>`

func TestReportInChromium(t *testing.T) {
	bin := chromium(t)
	r := loadSample(t)
	charts := sampleCharts(r)
	// COREPIN_REPORT_DIR keeps the report and screenshot (CI artifacts).
	dir := os.Getenv("COREPIN_REPORT_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	file, err := WriteHTML(dir, r, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	probed := filepath.Join(dir, "probed.html")
	if err := os.WriteFile(probed, bytes.Replace(b, []byte("</body>"), []byte(probeScript+"</body>"), 1), 0o644); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Both runs at once: each takes a few seconds to start Chromium.
	shot := filepath.Join(dir, "shot.png")
	type result struct {
		out []byte
		err error
	}
	dom := make(chan result, 1)
	go func() {
		out, err := runChromium(ctx, bin, probed, "--dump-dom", "--virtual-time-budget=5000")
		dom <- result{out, err}
	}()
	if _, err := runChromium(ctx, bin, file, "--window-size=1200,4000", "--screenshot="+shot); err != nil {
		t.Fatal(err)
	}
	res := <-dom
	if res.err != nil {
		t.Fatal(res.err)
	}
	domOut := res.out

	// The DOM: every chart drawn at a real size with its shapes.
	m := regexp.MustCompile(`PROBE\[(.*?)\]PROBE`).FindSubmatch(domOut)
	if m == nil {
		t.Fatalf("chromium --dump-dom has no probe result:\n%s", tail(string(domOut)))
	}
	got := strings.Fields(string(m[1]))
	if len(got) != len(charts) {
		t.Fatalf("chromium saw %d chart figures, want %d: %q", len(got), len(charts), got)
	}
	for i, g := range got {
		var kind string
		var w, h, shapes int
		if _, err := fmt.Sscanf(strings.ReplaceAll(g, ":", " "), "%s %d %d %d", &kind, &w, &h, &shapes); err != nil {
			t.Fatalf("probe %q: %v", g, err)
		}
		if kind != charts[i].Kind || w < 300 || h < 150 || shapes < 20 {
			t.Errorf("chart %d (%s %q) rendered as %s: want kind %s, at least 300x150 px and 20 shapes",
				i, charts[i].Kind, charts[i].Title, g, charts[i].Kind)
		}
	}

	// The screenshot: decodes, has the page's size, and is far from blank.
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("chromium wrote no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("decoding the screenshot: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 1200 || b.Dy() != 4000 {
		t.Errorf("screenshot is %dx%d, want 1200x4000", b.Dx(), b.Dy())
	}
	ink, colour := inkedFraction(img)
	t.Logf("screenshot %s: %.1f%% non-white pixels, %.2f%% saturated", shot, ink*100, colour*100)
	if ink < 0.03 {
		t.Errorf("screenshot is %.1f%% non-white, want at least 3%%: blank page?", ink*100)
	}
	// The charts are the only saturated colour in the page besides the
	// boxes' borders; a page without drawn charts stays well under this.
	if colour < 0.005 {
		t.Errorf("screenshot is %.2f%% saturated colour, want at least 0.5%%: charts not drawn?", colour*100)
	}
}

// inkedFraction returns the fractions of img's pixels that are not white,
// and that are strongly coloured (not grey).
func inkedFraction(img image.Image) (ink, colour float64) {
	b := img.Bounds()
	var n, nInk, nColour int
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, _ := img.At(x, y).RGBA()
			r, g, bl = r>>8, g>>8, bl>>8
			n++
			if r < 245 || g < 245 || bl < 245 {
				nInk++
			}
			if max(r, g, bl)-min(r, g, bl) > 80 {
				nColour++
			}
		}
	}
	return float64(nInk) / float64(n), float64(nColour) / float64(n)
}
