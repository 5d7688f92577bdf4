package cli

import (
	"io"
	"slices"
	"strings"
	"testing"
)

// The report's re-run commands learn which bench flags take a value from
// the bench command itself: every flag that does (with the root's -o),
// none that does not, from `corepin bench` and `corepin report` alike.
func TestBenchReportOptionsReadTheFlags(t *testing.T) {
	root := NewRoot(strings.NewReader(""), io.Discard, io.Discard)
	want := []string{"--db", "--driver", "--output", "--repeats", "--report-dir", "--seed", "--spec", "-o"}
	for _, name := range []string{"bench", "report"} {
		cmd, _, err := root.Find([]string{name})
		if err != nil {
			t.Fatal(err)
		}
		got := slices.Sorted(slices.Values(reportOptions(cmd).ValueFlags))
		if !slices.Equal(got, want) {
			t.Errorf("corepin %s: value flags %v, want %v", name, got, want)
		}
	}
}
