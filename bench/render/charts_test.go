package render

import (
	"encoding/xml"
	"errors"
	"fmt"
	"github.com/corepin/corepin/bench"
	"io"
	"math"
	"strings"
	"testing"
)

// checkSVG fails t unless s is one well-formed <svg> element with a
// positive width and height and no reference to anything outside it.
func checkSVG(t *testing.T, s string) {
	t.Helper()
	if !strings.HasPrefix(s, "<svg ") {
		t.Fatalf("svg starts %.40q, want <svg ", s)
	}
	dec := xml.NewDecoder(strings.NewReader(s))
	depth, elems := 0, 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("svg is not well-formed XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if depth == 0 {
				elems++
				if tok.Name.Local != "svg" {
					t.Fatalf("root element %q, want svg", tok.Name.Local)
				}
				for _, name := range []string{"width", "height"} {
					v := attr(tok, name)
					var f float64
					if _, err := fmt.Sscan(v, &f); err != nil || !(f > 0) {
						t.Errorf("svg %s=%q, want a positive number", name, v)
					}
				}
			}
			depth++
		case xml.EndElement:
			depth--
		}
	}
	if elems != 1 || depth != 0 {
		t.Fatalf("svg has %d root elements (depth %d at the end), want one", elems, depth)
	}
	checkSelfContained(t, s)
}

func attr(e xml.StartElement, name string) string {
	for _, a := range e.Attr {
		if a.Name.Local == name && a.Name.Space == "" {
			return a.Value
		}
	}
	return ""
}

func TestRenderChartKinds(t *testing.T) {
	tests := []struct {
		name  string
		chart bench.Chart
		// texts must appear in the SVG (titles, tick labels, legend).
		texts []string
	}{
		{
			name: "box with two series",
			chart: bench.Chart{Kind: bench.ChartBox, Title: "wall time", XLabel: "concurrency", YLabel: "s", XLabels: []string{"1", "4"},
				Series: []bench.Series{
					{Name: "pinned", Values: [][]float64{{10, 10.2, 10.1, 9.9, 10.3}, {10.4, 10.6, 10.5, 10.3, 12}}},
					{Name: "quota", Values: [][]float64{{10, 10.1, 10.2, 10, 10.1}, {13, 13.5, 14, 12.8, 13.1}}},
				}},
			texts: []string{"wall time", "concurrency", "pinned", "quota"},
		},
		{
			name: "heatmap",
			chart: bench.Chart{Kind: bench.ChartHeatmap, Title: "penalty %", XLabels: []string{"1", "2", "4"}, YLabels: []string{"pinned", "quota"},
				Grid: [][]float64{{0, 1.5, 3.25}, {0, 12, 31.5}}},
			texts: []string{"penalty %", "pinned", "quota", "31.5", "3.25"},
		},
		{
			name: "line",
			chart: bench.Chart{Kind: bench.ChartLine, Title: "fps", XLabel: "threads", Series: []bench.Series{
				{Name: "2 CPUs", X: []float64{1, 2, 4, 8}, Y: []float64{40, 78, 75, 70}},
				{Name: "4 CPUs", X: []float64{1, 2, 4, 8}, Y: []float64{41, 80, 121, 110}},
			}},
			texts: []string{"fps", "threads", "2 CPUs", "4 CPUs", ">8<"},
		},
		{
			name: "cdf on a log axis",
			chart: bench.Chart{Kind: bench.ChartCDF, Title: "latency", XLabel: "latency (ms)", YLabel: "percentile", LogX: true, Series: []bench.Series{
				{Name: "alone", X: []float64{0.5, 1, 1.9, 3.2, 6}, Y: []float64{1, 25, 50, 99, 99.9}},
				{Name: "batch", X: []float64{0.9, 2, 4.8, 13, 40}, Y: []float64{1, 25, 50, 99, 99.9}},
			}},
			texts: []string{"latency (ms)", "alone", "batch", ">10<"},
		},
		{
			name: "grouped bars",
			chart: bench.Chart{Kind: bench.ChartBar, Title: "throughput", XLabels: []string{"8x2", "4x4"}, Series: []bench.Series{
				{Name: "pinned", Y: []float64{400, 380}},
				{Name: "default", Y: []float64{350, math.NaN()}},
			}},
			texts: []string{"throughput", "8x2", "4x4", "pinned", "default"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rc := RenderChart(tc.chart)
			if rc.Note != "" {
				t.Fatalf("RenderChart note %q, want a drawn chart", rc.Note)
			}
			checkSVG(t, rc.SVG)
			for _, s := range tc.texts {
				if !strings.Contains(rc.SVG, s) {
					t.Errorf("svg lacks %q", s)
				}
			}
		})
	}
}

func TestRenderChartDegenerate(t *testing.T) {
	nan := math.NaN()
	inf := math.Inf(1)
	tests := []struct {
		name  string
		chart bench.Chart
		// noData: the chart must come out as the "no data" placeholder.
		noData bool
	}{
		{name: "box without series", chart: bench.Chart{Kind: bench.ChartBox, XLabels: []string{"1"}}, noData: true},
		{name: "box with empty categories", chart: bench.Chart{Kind: bench.ChartBox, Series: []bench.Series{{Name: "a", Values: [][]float64{{}, nil}}}}, noData: true},
		{name: "box of NaN", chart: bench.Chart{Kind: bench.ChartBox, Series: []bench.Series{{Values: [][]float64{{nan, nan}}}}}, noData: true},
		{name: "box with one value", chart: bench.Chart{Kind: bench.ChartBox, Series: []bench.Series{{Values: [][]float64{{3}}}}}},
		{name: "box with more categories than labels", chart: bench.Chart{Kind: bench.ChartBox, XLabels: []string{"a"},
			Series: []bench.Series{{Values: [][]float64{{1, 2}, {3, 4}, {nan, 5, inf}}}}}},
		{name: "line without series", chart: bench.Chart{Kind: bench.ChartLine}, noData: true},
		{name: "line of NaN", chart: bench.Chart{Kind: bench.ChartLine, Series: []bench.Series{{X: []float64{nan, 1}, Y: []float64{1, nan}}}}, noData: true},
		{name: "line with one point", chart: bench.Chart{Kind: bench.ChartLine, Series: []bench.Series{{Name: "one", X: []float64{4}, Y: []float64{2}}}}},
		{name: "line with X and Y of different lengths", chart: bench.Chart{Kind: bench.ChartLine, Series: []bench.Series{{X: []float64{1, 2, 3}, Y: []float64{1}}}}},
		{name: "flat line", chart: bench.Chart{Kind: bench.ChartLine, Series: []bench.Series{{X: []float64{1, 2, 3}, Y: []float64{0, 0, 0}}}}},
		{name: "line with infinities", chart: bench.Chart{Kind: bench.ChartLine, Series: []bench.Series{{X: []float64{1, inf, 3}, Y: []float64{1, 2, -inf}}}}},
		{name: "cdf log axis with zero and negative latencies", chart: bench.Chart{Kind: bench.ChartCDF, LogX: true,
			Series: []bench.Series{{X: []float64{0, -1, 2}, Y: []float64{0, 10, 100}}}}},
		{name: "cdf log axis, only zeros", chart: bench.Chart{Kind: bench.ChartCDF, LogX: true, Series: []bench.Series{{X: []float64{0, 0}, Y: []float64{50, 100}}}}, noData: true},
		{name: "cdf log axis, one value", chart: bench.Chart{Kind: bench.ChartCDF, LogX: true, Series: []bench.Series{{X: []float64{3}, Y: []float64{50}}}}},
		{name: "cdf unsorted", chart: bench.Chart{Kind: bench.ChartCDF, Series: []bench.Series{{X: []float64{5, 1, 3}, Y: []float64{100, 0, 50}}}}},
		{name: "heatmap without grid", chart: bench.Chart{Kind: bench.ChartHeatmap, XLabels: []string{"a"}, YLabels: []string{"b"}}, noData: true},
		{name: "heatmap of NaN", chart: bench.Chart{Kind: bench.ChartHeatmap, Grid: [][]float64{{nan, nan}, {nan}}}, noData: true},
		{name: "heatmap single cell", chart: bench.Chart{Kind: bench.ChartHeatmap, Grid: [][]float64{{7}}}},
		{name: "heatmap all equal, ragged, missing labels", chart: bench.Chart{Kind: bench.ChartHeatmap, XLabels: []string{"x"},
			Grid: [][]float64{{2, 2, 2}, {2}, {nan, 2, inf}}}},
		{name: "heatmap large grid", chart: bench.Chart{Kind: bench.ChartHeatmap, Grid: bigGrid(40, 30)}},
		{name: "bar without series", chart: bench.Chart{Kind: bench.ChartBar, XLabels: []string{"a", "b"}}, noData: true},
		{name: "bar of NaN", chart: bench.Chart{Kind: bench.ChartBar, XLabels: []string{"a"}, Series: []bench.Series{{Y: []float64{nan}}}}, noData: true},
		{name: "bar with one value", chart: bench.Chart{Kind: bench.ChartBar, Series: []bench.Series{{Y: []float64{5}}}}},
		{name: "bar negative", chart: bench.Chart{Kind: bench.ChartBar, XLabels: []string{"a", "b"}, Series: []bench.Series{{Y: []float64{-5, 3}}}}},
		{name: "many series", chart: bench.Chart{Kind: bench.ChartLine, Series: manySeries(14)}},
		{name: "unknown kind", chart: bench.Chart{Kind: "pie", Title: "pie"}, noData: true},
		{name: "title needing escapes", chart: bench.Chart{Kind: bench.ChartBar, Title: `<script>alert("x")</script> & "q"`,
			XLabels: []string{"<b>"}, Series: []bench.Series{{Name: "</svg>", Y: []float64{1}}, {Name: "b", Y: []float64{2}}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rc := RenderChart(tc.chart)
			checkSVG(t, rc.SVG)
			if got := rc.Note != ""; got != tc.noData {
				t.Errorf("RenderChart note %q, placeholder = %v, want %v", rc.Note, got, tc.noData)
			}
			if strings.Contains(rc.SVG, "<script") || strings.Contains(rc.SVG, "<b>") {
				t.Errorf("svg carries unescaped markup from the chart's text")
			}
		})
	}
}

func bigGrid(cols, rows int) [][]float64 {
	g := make([][]float64, rows)
	for r := range g {
		g[r] = make([]float64, cols)
		for c := range g[r] {
			g[r][c] = float64(r*cols+c) * 1.37
		}
	}
	return g
}

func manySeries(n int) []bench.Series {
	out := make([]bench.Series, n)
	for i := range out {
		out[i] = bench.Series{Name: "series number " + string(rune('A'+i)), X: []float64{1, 2, 3}, Y: []float64{float64(i), float64(i + 1), float64(2 * i)}}
	}
	return out
}

func TestLogTicks(t *testing.T) {
	tests := []struct {
		name   string
		lo, hi float64
		want   []string // labelled ticks
	}{
		{name: "two decades", lo: 0.4, hi: 30, want: []string{"0.5", "1", "2", "5", "10", "20"}},
		{name: "many decades", lo: 0.001, hi: 1000, want: []string{"0.001", "0.01", "0.1", "1", "10", "100", "1000"}},
		{name: "empty range", lo: 5, hi: 5},
		{name: "non-positive", lo: 0, hi: 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, tk := range (logTicks{}).Ticks(tc.lo, tc.hi) {
				if tk.Label != "" {
					got = append(got, tk.Label)
				}
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("logTicks(%g, %g) labels = %q, want %q", tc.lo, tc.hi, got, tc.want)
			}
		})
	}
}

func TestRenderChartLongTitle(t *testing.T) {
	long := strings.Repeat("a very long chart title ", 12) + "END"
	rc := RenderChart(bench.Chart{Kind: bench.ChartBar, Title: long, Series: []bench.Series{{Y: []float64{1, 2}}}})
	checkSVG(t, rc.SVG)
	if !strings.Contains(rc.SVG, "…</text>") {
		t.Errorf("a title wider than the chart is not cut short with an ellipsis")
	}
	if !strings.Contains(rc.SVG, `aria-label="`+long+`"`) {
		t.Errorf("the svg's aria-label lacks the whole title")
	}
}
