package render

import (
	"fmt"
	"github.com/corepin/corepin/bench"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteText writes the terminal summary of r: per experiment its tables and
// recommendation.
func WriteText(w io.Writer, r bench.Report) error {
	var b strings.Builder
	fmt.Fprintf(&b, "corepin bench%s on %s (%s, kernel %s, %s)\n", map[bool]string{true: " --quick", false: ""}[r.Quick],
		r.Hostname, r.TopologySummary, r.Kernel, r.Driver)
	for _, e := range r.Experiments {
		fmt.Fprintf(&b, "\n== %s: %s (%.0f s)\n", e.Name, e.Title, e.Elapsed)
		if e.Analysis.Notice != "" {
			fmt.Fprintf(&b, "   NOTE: %s\n", e.Analysis.Notice)
		}
		if e.Error != "" {
			fmt.Fprintf(&b, "   error: %s\n", e.Error)
		}
		for _, t := range e.Analysis.Tables {
			writeTable(&b, t)
		}
		if e.Analysis.Recommendation != "" {
			fmt.Fprintf(&b, "\n  Recommendation: %s\n", e.Analysis.Recommendation)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeTable(b *strings.Builder, t bench.Table) {
	if t.Title != "" {
		fmt.Fprintf(b, "\n  %s\n", t.Title)
	}
	tw := tabwriter.NewWriter(b, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  %s\n", strings.Join(t.Columns, "\t"))
	for _, row := range t.Rows {
		fmt.Fprintf(tw, "  %s\n", strings.Join(row, "\t"))
	}
	tw.Flush()
	if t.Note != "" {
		fmt.Fprintf(b, "  (%s)\n", t.Note)
	}
}
