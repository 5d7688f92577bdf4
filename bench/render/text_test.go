package render

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/corepin/corepin/bench"
)

// Issue 8 §4: an experiment's Notice (no ffmpeg: the spin kernel measured
// instead of transcodes) is the first line under its heading in the text,
// and leads its section of the report, before the recommendation.
func TestNoticeComesFirst(t *testing.T) {
	const notice = "no transcodes measured: ffmpeg with libx264 not found, so this experiment measures corepin's Go spin kernel instead"
	r := bench.Report{Experiments: []bench.ExperimentReport{{Name: "threads", Title: "thread count swept",
		Analysis: bench.Analysis{Notice: notice, Recommendation: "with 2 pinned CPUs, run 2 threads",
			Tables: []bench.Table{{Title: "One job", Columns: []string{"threads"}, Rows: [][]string{{"2"}}}}}}}}
	var text bytes.Buffer
	if err := WriteText(&text, r); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(text.String(), "\n")
	i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "== threads") })
	if i < 0 || i+1 >= len(lines) || lines[i+1] != "   NOTE: "+notice {
		t.Errorf("text after the heading is not the notice:\n%s", text.String())
	}
	var html bytes.Buffer
	if err := RenderHTML(&html, r, Options{}); err != nil {
		t.Fatal(err)
	}
	doc := html.String()
	h, n, rec := strings.Index(doc, "<h2>threads"), strings.Index(doc, "no transcodes measured"), strings.Index(doc, "Recommendation:")
	if h < 0 || n < h || rec < n {
		t.Errorf("the report section does not lead with the notice (heading %d, notice %d, recommendation %d)", h, n, rec)
	}
	r.Experiments[0].Analysis.Notice = ""
	text.Reset()
	if err := WriteText(&text, r); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(text.String(), "NOTE:") {
		t.Errorf("text without a notice prints one:\n%s", text.String())
	}
}
