package render

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/corepin/corepin/bench"
	"html"
	"image/color"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/palette"
	"gonum.org/v1/plot/palette/moreland"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Chart geometry: the SVG's user space is in points (gonum/plot's unit)
// and is displayed at chartWidthPx x chartHeightPx CSS pixels (96/72 of
// the points), so text drawn at 10 pt reads as about 13 px.
const (
	chartWidthPx  = 640
	chartHeightPx = 360
	chartW        = vg.Length(chartWidthPx * 72 / 96)
	chartH        = vg.Length(chartHeightPx * 72 / 96)
	// noDataHeightPx is the height of the placeholder drawn for a chart
	// without data.
	noDataHeightPx = 120
)

// sans returns Liberation Sans (embedded in gonum/plot) at size points.
// Text is measured in it for layout, and the report's CSS asks the browser
// for the same face (or a metric-compatible one: Arimo, Arial), so
// labels take the room they were given. gonum/plot's default is the serif
// variant.
func sans(size vg.Length) font.Font {
	return font.Font{Typeface: "Liberation", Variant: "Sans", Size: size}
}

// seriesColors is the Tableau 10 palette: distinct in hue and lightness
// and readable for the common forms of colour blindness.
var seriesColors = []color.RGBA{
	{0x4e, 0x79, 0xa7, 0xff}, {0xf2, 0x8e, 0x2b, 0xff}, {0xe1, 0x57, 0x59, 0xff},
	{0x76, 0xb7, 0xb2, 0xff}, {0x59, 0xa1, 0x4f, 0xff}, {0xed, 0xc9, 0x48, 0xff},
	{0xb0, 0x7a, 0xa1, 0xff}, {0xff, 0x9d, 0xa7, 0xff}, {0x9c, 0x75, 0x5f, 0xff},
	{0xba, 0xb0, 0xac, 0xff},
}

func seriesColor(i int) color.RGBA { return seriesColors[i%len(seriesColors)] }

var seriesGlyphs = []draw.GlyphDrawer{
	draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.PyramidGlyph{},
	draw.RingGlyph{}, draw.BoxGlyph{}, draw.CrossGlyph{}, draw.PlusGlyph{},
}

// errNoData is returned by the chart builders when nothing is left to draw
// once NaN, infinite and (on a log axis) non-positive values are dropped.
var errNoData = errors.New("no data")

// RenderedChart is one chart of the report as an inline SVG element.
type RenderedChart struct {
	Chart bench.Chart
	// SVG is the <svg> element (no XML prolog), from RenderChart only.
	SVG string
	// Note says why the chart is a placeholder ("no data"), or is empty.
	Note string
}

// RenderChart draws c as an inline <svg> element of about 640x360 px,
// without an XML prolog, external references or scripts, ready to be
// placed in an HTML document. It never panics: a chart without finite
// data, or one gonum/plot refuses to draw, becomes a small placeholder
// SVG saying so, and Note carries the reason.
func RenderChart(c bench.Chart) (rc RenderedChart) {
	rc.Chart = c
	defer func() {
		if r := recover(); r != nil {
			rc.Note = fmt.Sprintf("could not draw this chart: %v", r)
			rc.SVG = placeholderSVG(c.Title, rc.Note)
		}
	}()
	svg, err := renderChart(c)
	if err != nil {
		rc.Note = err.Error()
		if errors.Is(err, errNoData) {
			rc.Note = "no data"
		}
		rc.SVG = placeholderSVG(c.Title, rc.Note)
		return rc
	}
	rc.SVG = svg
	return rc
}

func renderChart(c bench.Chart) (string, error) {
	var (
		p      *plot.Plot
		legend []legendEntry
		err    error
	)
	switch c.Kind {
	case bench.ChartBox:
		p, legend, err = boxPlot(c)
	case bench.ChartHeatmap:
		p, err = heatmapPlot(c)
	case bench.ChartLine, bench.ChartCDF:
		p, legend, err = linePlot(c)
	case bench.ChartBar:
		p, legend, err = barPlot(c)
	default:
		return "", fmt.Errorf("unknown chart kind %q", c.Kind)
	}
	if err != nil {
		return "", err
	}
	canvas := vgsvg.New(chartW, chartH)
	dc := draw.New(canvas)
	plotArea := dc
	if len(legend) > 0 {
		h := drawLegend(dc, legend)
		plotArea = draw.Crop(dc, 0, 0, h, 0)
	}
	p.Draw(plotArea)
	var b bytes.Buffer
	if _, err := canvas.WriteTo(&b); err != nil {
		return "", fmt.Errorf("writing svg: %w", err)
	}
	return inlineSVG(b.String(), c.Title)
}

// newPlot returns a plot with the report's common style: title, axis
// labels, a light grid.
func newPlot(c bench.Chart) *plot.Plot {
	p := plot.New()
	p.Title.Text, p.Title.TextStyle.Font = fitText(p.Title.TextStyle, c.Title, chartW-16, 12, 9)
	p.Title.Padding = 6
	p.X.Label.Text = c.XLabel
	p.Y.Label.Text = c.YLabel
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font = sans(10)
		a.Tick.Label.Font = sans(9)
	}
	return p
}

// fitText returns txt and the largest font from size down to minSize in
// which it fits in width, cutting it short with an ellipsis if it fits in
// none: gonum/plot does not wrap, and would draw past the edge.
func fitText(sty text.Style, txt string, width, size, minSize vg.Length) (string, font.Font) {
	for ; size >= minSize; size-- {
		sty.Font = sans(size)
		if sty.Width(txt) <= width {
			return txt, sty.Font
		}
	}
	sty.Font = sans(minSize)
	r := []rune(txt)
	for len(r) > 0 && sty.Width(string(r)+"…") > width {
		r = r[:len(r)-1]
	}
	return string(r) + "…", sty.Font
}

func addGrid(p *plot.Plot, vertical bool) {
	g := plotter.NewGrid()
	g.Horizontal.Color = color.Gray{0xdd}
	g.Horizontal.Width = 0.5
	if vertical {
		g.Vertical.Color = color.Gray{0xee}
		g.Vertical.Width = 0.5
	} else {
		g.Vertical.Width = 0
	}
	p.Add(g)
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// categories returns the category labels of a box or bar chart: XLabels,
// padded with numbers when a series has more categories than labels.
func categories(c bench.Chart) []string {
	n := len(c.XLabels)
	for _, s := range c.Series {
		n = max(n, len(s.Values), len(s.Y))
	}
	labels := slices.Clone(c.XLabels)
	for i := len(labels); i < n; i++ {
		labels = append(labels, strconv.Itoa(i+1))
	}
	return labels
}

// groupLayout returns the width of one bar or box and the offset of series
// i's within its category, for n series in ncat categories, so a group
// takes about 80% of a category's width on a plot about 400 pt wide.
func groupLayout(ncat, n int) (width vg.Length, offset func(i int) vg.Length) {
	slot := vg.Length(400) / vg.Length(max(ncat, 1))
	width = min(slot*0.8/vg.Length(max(n, 1)), 40)
	return width, func(i int) vg.Length {
		return (vg.Length(i) - vg.Length(n-1)/2) * width
	}
}

// grouped is a chart of one group of boxes or bars per category, a member
// per series: what boxPlot and barPlot share before and after drawing.
type grouped struct {
	p      *plot.Plot
	cats   []string
	width  vg.Length
	offset func(i int) vg.Length
}

// newGrouped lays out c's categories, or returns errNoData without any.
func newGrouped(c bench.Chart) (grouped, error) {
	cats := categories(c)
	if len(cats) == 0 {
		return grouped{}, errNoData
	}
	p := newPlot(c)
	addGrid(p, false)
	width, offset := groupLayout(len(cats), len(c.Series))
	return grouped{p: p, cats: cats, width: width, offset: offset}, nil
}

// finish names the categories, keeps the outer members of a group inside
// the axis and drops a legend of one entry; errNoData if nothing was drawn.
func (g grouped) finish(drawn int, legend []legendEntry) (*plot.Plot, []legendEntry, error) {
	if drawn == 0 {
		return nil, nil, errNoData
	}
	g.p.NominalX(g.cats...)
	g.p.X.Min = math.Min(g.p.X.Min, -0.5)
	g.p.X.Max = math.Max(g.p.X.Max, float64(len(g.cats))-0.5)
	if len(legend) < 2 {
		legend = nil
	}
	return g.p, legend, nil
}

func boxPlot(c bench.Chart) (*plot.Plot, []legendEntry, error) {
	g, err := newGrouped(c)
	if err != nil {
		return nil, nil, err
	}
	p, cats, width, offset := g.p, g.cats, g.width, g.offset
	var legend []legendEntry
	drawn := 0
	for i, s := range c.Series {
		col := seriesColor(i)
		fill := col
		fill.A = 0x66
		fill = premultiply(fill)
		has := false
		for j, vals := range s.Values {
			vs := make(plotter.Values, 0, len(vals))
			for _, v := range vals {
				if finite(v) {
					vs = append(vs, v)
				}
			}
			if len(vs) == 0 {
				continue
			}
			b, err := plotter.NewBoxPlot(width, float64(j), vs)
			if err != nil {
				return nil, nil, fmt.Errorf("drawing box %s/%s: %w", s.Name, cats[j], err)
			}
			b.Offset = offset(i)
			b.FillColor = fill
			b.BoxStyle.Color = col
			b.BoxStyle.Width = 1
			b.MedianStyle.Color = color.Black
			b.MedianStyle.Width = 1.5
			b.WhiskerStyle.Color = col
			b.WhiskerStyle.Width = 1
			b.GlyphStyle.Color = col
			b.GlyphStyle.Radius = 2
			p.Add(b)
			has = true
			drawn++
		}
		if has && s.Name != "" {
			legend = append(legend, legendEntry{name: s.Name, thumb: rectThumb{fill, col}})
		}
	}
	return g.finish(drawn, legend)
}

func barPlot(c bench.Chart) (*plot.Plot, []legendEntry, error) {
	g, err := newGrouped(c)
	if err != nil {
		return nil, nil, err
	}
	p, cats, width, offset := g.p, g.cats, g.width, g.offset
	var legend []legendEntry
	drawn := 0
	for i, s := range c.Series {
		vs := make(plotter.Values, len(cats))
		has := false
		for j := range vs {
			if j < len(s.Y) && finite(s.Y[j]) {
				vs[j] = s.Y[j]
				has = true
			}
		}
		if !has {
			continue
		}
		b, err := plotter.NewBarChart(vs, width)
		if err != nil {
			return nil, nil, fmt.Errorf("drawing bars %s: %w", s.Name, err)
		}
		b.Offset = offset(i)
		b.Color = seriesColor(i)
		b.LineStyle.Width = 0
		p.Add(b)
		drawn++
		if s.Name != "" {
			legend = append(legend, legendEntry{name: s.Name, thumb: rectThumb{seriesColor(i), seriesColor(i)}})
		}
	}
	if p.Y.Min > 0 {
		p.Y.Min = 0 // bars start at zero
	}
	if p.Y.Max > 0 {
		p.Y.Max += (p.Y.Max - p.Y.Min) * 0.05 // headroom under the title
	}
	return g.finish(drawn, legend)
}

func linePlot(c bench.Chart) (*plot.Plot, []legendEntry, error) {
	p := newPlot(c)
	addGrid(p, true)
	cdf := c.Kind == bench.ChartCDF
	var (
		legend []legendEntry
		xs     []float64
		ymin   = math.Inf(1)
		ymax   = math.Inf(-1)
	)
	for i, s := range c.Series {
		var pts plotter.XYs
		for j := range min(len(s.X), len(s.Y)) {
			x, y := s.X[j], s.Y[j]
			if !finite(x) || !finite(y) || (c.LogX && x <= 0) {
				continue
			}
			pts = append(pts, plotter.XY{X: x, Y: y})
			xs = append(xs, x)
			ymin, ymax = math.Min(ymin, y), math.Max(ymax, y)
		}
		if len(pts) == 0 {
			continue
		}
		if cdf {
			// A CDF is drawn in order of latency, whatever the input order.
			slices.SortStableFunc(pts, func(a, b plotter.XY) int { return cmpFloat(a.X, b.X) })
		}
		col := seriesColor(i)
		line, err := plotter.NewLine(pts)
		if err != nil {
			return nil, nil, fmt.Errorf("drawing line %s: %w", s.Name, err)
		}
		line.Color = col
		line.Width = 1.75
		var thumbs multiThumb
		thumbs = append(thumbs, line)
		p.Add(line)
		// Points are marked where there are few enough to tell apart (and
		// always for a single point, which has no line).
		if !cdf && len(pts) <= 30 || len(pts) == 1 {
			sc, err := plotter.NewScatter(pts)
			if err != nil {
				return nil, nil, fmt.Errorf("drawing points %s: %w", s.Name, err)
			}
			sc.GlyphStyle = draw.GlyphStyle{Color: col, Radius: 2.5, Shape: seriesGlyphs[i%len(seriesGlyphs)]}
			p.Add(sc)
			thumbs = append(thumbs, sc)
		}
		if s.Name != "" {
			legend = append(legend, legendEntry{name: s.Name, thumb: thumbs})
		}
	}
	if len(xs) == 0 {
		return nil, nil, errNoData
	}
	if c.LogX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = logTicks{}
		lo, hi := slices.Min(xs), slices.Max(xs)
		if lo == hi {
			// A log axis needs a range: a decade around a single value.
			p.X.Min, p.X.Max = lo/math.Sqrt(10), hi*math.Sqrt(10)
		}
	} else if ticks, ok := integerTicks(xs); ok && !cdf {
		p.X.Tick.Marker = ticks
	}
	// Room around the data, so end points and their markers are not cut
	// by the axes or the frame.
	padAxis(&p.X, 0.03, c.LogX)
	padAxis(&p.Y, 0.05, false)
	if cdf && ymin >= 0 && ymax <= 100 {
		p.Y.Min, p.Y.Max = -2, 102
		p.Y.Tick.Marker = plot.ConstantTicks{{Value: 0, Label: "0"}, {Value: 25, Label: "25"},
			{Value: 50, Label: "50"}, {Value: 75, Label: "75"}, {Value: 90, Label: "90"}, {Value: 100, Label: "100"}}
	}
	if ymin == ymax {
		// A flat line gets a visible range instead of a degenerate axis.
		d := math.Max(math.Abs(ymin)*0.1, 1)
		p.Y.Min, p.Y.Max = ymin-d, ymax+d
	}
	if len(legend) < 2 {
		legend = nil
	}
	return p, legend, nil
}

// padAxis widens a's range by frac of its span on each side (by that
// fraction of its decades on a log axis); an empty range stays as it is.
func padAxis(a *plot.Axis, frac float64, log bool) {
	if !(a.Max > a.Min) {
		return
	}
	if log {
		f := math.Pow(a.Max/a.Min, frac)
		a.Min, a.Max = a.Min/f, a.Max*f
		return
	}
	d := (a.Max - a.Min) * frac
	a.Min, a.Max = a.Min-d, a.Max+d
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// integerTicks labels every distinct X of a sweep over a few integers
// (threads 1, 2, 4, 8, 16) instead of gonum/plot's round-number ticks.
func integerTicks(xs []float64) (plot.ConstantTicks, bool) {
	distinct := slices.Clone(xs)
	slices.Sort(distinct)
	distinct = slices.Compact(distinct)
	if len(distinct) > 16 {
		return nil, false
	}
	var ticks plot.ConstantTicks
	for _, x := range distinct {
		if x != math.Trunc(x) || math.Abs(x) > 1e6 {
			return nil, false
		}
		ticks = append(ticks, plot.Tick{Value: x, Label: strconv.FormatFloat(x, 'f', -1, 64)})
	}
	// Labels of a sweep 1..64 crowd at the small end; drop those closer than
	// a 25th of the range to the previous labelled one.
	span := distinct[len(distinct)-1] - distinct[0]
	last := math.Inf(-1)
	for i := range ticks {
		if ticks[i].Value-last < span/25 {
			ticks[i].Label = ""
			continue
		}
		last = ticks[i].Value
	}
	return ticks, true
}

// logTicks labels 1, 2 and 5 times each power of ten when the range spans
// few decades, and only the powers of ten otherwise; unlabelled minor
// ticks mark the other integers times each power.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(lo > 0) || !(hi > lo) {
		return nil
	}
	e0, e1 := int(math.Floor(math.Log10(lo))), int(math.Ceil(math.Log10(hi)))
	majors := []float64{1, 2, 5}
	if e1-e0 > 3 {
		majors = []float64{1}
	}
	var ticks []plot.Tick
	for e := e0; e <= e1; e++ {
		pow := math.Pow(10, float64(e))
		for m := 1.0; m < 10; m++ {
			v := m * pow
			if v < lo*(1-1e-9) || v > hi*(1+1e-9) {
				continue
			}
			t := plot.Tick{Value: v}
			if slices.Contains(majors, m) {
				t.Label = strconv.FormatFloat(v, 'g', 4, 64)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}

// grid adapts Chart.Grid (rows of Y, columns of X) to plotter.GridXYZ
// with Grid's first row at the top, as in the tables; cells missing from a
// short row are NaN.
type grid struct {
	z          [][]float64
	cols, rows int
}

func (g grid) Dims() (c, r int) { return g.cols, g.rows }
func (g grid) X(c int) float64  { return float64(c) }
func (g grid) Y(r int) float64  { return float64(r) }
func (g grid) Z(c, r int) float64 {
	r = g.rows - 1 - r
	if r >= 0 && r < len(g.z) && c < len(g.z[r]) {
		return g.z[r][c]
	}
	return math.NaN()
}

func heatmapPlot(c bench.Chart) (*plot.Plot, error) {
	g := grid{z: c.Grid, rows: max(len(c.Grid), len(c.YLabels)), cols: len(c.XLabels)}
	for _, row := range c.Grid {
		g.cols = max(g.cols, len(row))
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for r := range g.rows {
		for col := range g.cols {
			if v := g.Z(col, r); finite(v) {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	if g.rows == 0 || g.cols == 0 || lo > hi {
		return nil, errNoData
	}
	if lo == hi {
		lo, hi = lo-0.5, hi+0.5
	}
	cm := moreland.SmoothBlueRed()
	cm.SetMin(lo)
	cm.SetMax(hi)
	pal := cm.Palette(255)
	h := plotter.NewHeatMap(g, pal)
	h.Min, h.Max = lo, hi
	h.NaN = color.Gray{0xee}
	h.Underflow, h.Overflow = h.NaN, h.NaN // ±Inf

	p := newPlot(c)
	p.Add(h)
	// Value labels, sized to the cells, coloured for contrast.
	cellW := 400 / vg.Length(g.cols)
	cellH := 200 / vg.Length(g.rows)
	size := min(vg.Length(10), cellH*0.45)
	var xyl plotter.XYLabels
	var styles []text.Style
	for r := range g.rows {
		for col := range g.cols {
			v := g.Z(col, r)
			lbl, fg := "n/a", color.Color(color.Gray{0x88})
			if finite(v) {
				lbl, fg = formatCell(v), labelColor(pal, lo, hi, v)
			}
			sty := text.Style{
				Font:    sans(size),
				XAlign:  draw.XCenter,
				YAlign:  draw.YCenter,
				Handler: plot.DefaultTextHandler,
				Color:   fg,
			}
			if sty.Width(lbl) > cellW*0.95 || size < 6 {
				continue // too small a cell to label legibly
			}
			xyl.XYs = append(xyl.XYs, plotter.XY{X: float64(col), Y: float64(r)})
			xyl.Labels = append(xyl.Labels, lbl)
			styles = append(styles, sty)
		}
	}
	if len(xyl.Labels) > 0 {
		labels, err := plotter.NewLabels(xyl)
		if err != nil {
			return nil, fmt.Errorf("drawing cell labels: %w", err)
		}
		labels.TextStyle = styles
		p.Add(labels)
	}
	xl, yl := padLabels(c.XLabels, g.cols), padLabels(c.YLabels, g.rows)
	slices.Reverse(yl)
	p.NominalX(xl...)
	p.NominalY(yl...)
	p.X.Min, p.X.Max = -0.5, float64(g.cols)-0.5
	p.Y.Min, p.Y.Max = -0.5, float64(g.rows)-0.5
	return p, nil
}

func padLabels(l []string, n int) []string {
	out := slices.Clone(l[:min(len(l), n)])
	for i := len(out); i < n; i++ {
		out = append(out, strconv.Itoa(i))
	}
	return out
}

// formatCell prints a heat map value to 3 significant digits (whole
// numbers from 1000 up), without trailing zeros or an exponent for the
// values a report shows: 0.8, 14.9, 1234.
func formatCell(v float64) string {
	a := math.Abs(v)
	switch {
	case a == 0:
		return "0"
	case a >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a < 0.001:
		return strconv.FormatFloat(v, 'g', 2, 64)
	}
	scale := math.Pow(10, 2-math.Floor(math.Log10(a)))
	return strconv.FormatFloat(math.Round(v*scale)/scale, 'f', -1, 64)
}

// labelColor is white on a dark cell, black on a light one.
func labelColor(pal palette.Palette, lo, hi, v float64) color.Color {
	cols := pal.Colors()
	i := int((v - lo) / (hi - lo) * float64(len(cols)-1))
	i = max(0, min(i, len(cols)-1))
	r, g, b, _ := cols[i].RGBA()
	lum := 0.2126*float64(r) + 0.7152*float64(g) + 0.0722*float64(b)
	if lum < 0.45*0xffff {
		return color.White
	}
	return color.Black
}

func premultiply(c color.RGBA) color.RGBA {
	return color.RGBA{
		R: uint8(uint16(c.R) * uint16(c.A) / 0xff),
		G: uint8(uint16(c.G) * uint16(c.A) / 0xff),
		B: uint8(uint16(c.B) * uint16(c.A) / 0xff),
		A: c.A,
	}
}

// legendEntry is one series' name and sample of its style.
type legendEntry struct {
	name  string
	thumb plot.Thumbnailer
}

type rectThumb struct{ fill, line color.Color }

func (t rectThumb) Thumbnail(c *draw.Canvas) {
	pts := []vg.Point{
		{X: c.Min.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Min.Y},
		{X: c.Max.X, Y: c.Max.Y}, {X: c.Min.X, Y: c.Max.Y},
	}
	c.FillPolygon(t.fill, pts)
	c.StrokeLines(draw.LineStyle{Color: t.line, Width: 1}, append(pts, pts[0]))
}

type multiThumb []plot.Thumbnailer

func (m multiThumb) Thumbnail(c *draw.Canvas) {
	for _, t := range m {
		t.Thumbnail(c)
	}
}

// drawLegend draws the entries in rows along the bottom of c, wrapping as
// needed, and returns the height it took. A legend below the plot never
// covers data, which gonum/plot's legend inside the data area can.
func drawLegend(c draw.Canvas, entries []legendEntry) vg.Length {
	sty := text.Style{
		Font:    sans(9),
		XAlign:  draw.XLeft,
		YAlign:  draw.YCenter,
		Handler: plot.DefaultTextHandler,
		Color:   color.Black,
	}
	const (
		thumbW = vg.Length(14)
		thumbH = vg.Length(8)
		gap    = vg.Length(4)
		sep    = vg.Length(14)
		rowH   = vg.Length(14)
		margin = vg.Length(6)
	)
	type placed struct {
		e   legendEntry
		x   vg.Length
		row int
	}
	avail := c.Max.X - c.Min.X - 2*margin
	var (
		items []placed
		x     vg.Length
		row   int
		rowWs []vg.Length
	)
	for _, e := range entries {
		w := thumbW + gap + sty.Width(e.name)
		if x > 0 && x+w > avail {
			rowWs = append(rowWs, x-sep)
			x, row = 0, row+1
		}
		items = append(items, placed{e, x, row})
		x += w + sep
	}
	rowWs = append(rowWs, x-sep)
	height := vg.Length(row+1)*rowH + margin
	for _, it := range items {
		// Centre each row under the plot.
		left := c.Min.X + margin + (avail-rowWs[it.row])/2 + it.x
		cy := c.Min.Y + margin/2 + vg.Length(row-it.row)*rowH + rowH/2
		tc := draw.Canvas{Canvas: c.Canvas, Rectangle: vg.Rectangle{
			Min: vg.Point{X: left, Y: cy - thumbH/2},
			Max: vg.Point{X: left + thumbW, Y: cy + thumbH/2},
		}}
		it.e.thumb.Thumbnail(&tc)
		c.FillText(sty, vg.Point{X: left + thumbW + gap, Y: cy}, it.e.name)
	}
	return height
}

var svgSize = regexp.MustCompile(`^<svg width="[^"]*" height="[^"]*"`)

// inlineSVG turns vgsvg's standalone document into an element for an HTML
// page: the XML prolog and comment go, the size becomes CSS pixels, and the
// chart gets an accessible name.
func inlineSVG(doc, title string) (string, error) {
	i := strings.Index(doc, "<svg")
	if i < 0 {
		return "", errors.New("writing svg: no <svg> element in the output")
	}
	doc = doc[i:]
	head := fmt.Sprintf(`<svg width="%d" height="%d" role="img" aria-label="%s"`,
		chartWidthPx, chartHeightPx, html.EscapeString(title))
	if !svgSize.MatchString(doc) {
		return "", errors.New("writing svg: unexpected <svg> header")
	}
	return svgSize.ReplaceAllLiteralString(doc, head), nil
}

// placeholderSVG is the figure drawn in place of a chart without data.
func placeholderSVG(title, note string) string {
	const w, h = chartWidthPx, noDataHeightPx
	return fmt.Sprintf(`<svg width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s" xmlns="http://www.w3.org/2000/svg">`+
		`<rect x="0.5" y="0.5" width="%d" height="%d" fill="#fafafa" stroke="#ccc"/>`+
		`<text x="%d" y="45" text-anchor="middle" font-size="15" fill="#333">%s</text>`+
		`<text x="%d" y="75" text-anchor="middle" font-size="13" fill="#777">%s</text></svg>`,
		w, h, w, h, html.EscapeString(title), w-1, h-1,
		w/2, html.EscapeString(title), w/2, html.EscapeString(note))
}
