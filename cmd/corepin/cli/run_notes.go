package cli

import (
	"fmt"
	"io"
	"strings"
)

// runNotes gathers what `corepin run` has to say before its first job:
// by default one line, a few words per note, and with -v each note in
// full, one line each, as kubectl keeps its detail for -v (issue 17 §2: a
// run without root printed nine lines, every time).
type runNotes struct {
	short  []string
	detail []string
}

// add records a note: short, a few words for the one line, and its
// detail for -v.
func (n *runNotes) add(short string, detail ...string) {
	n.short = append(n.short, short)
	n.detail = append(n.detail, detail...)
}

// print writes the notes to w: one line, or with verbose every detail.
func (n *runNotes) print(w io.Writer, verbose bool) {
	if len(n.short) == 0 {
		return
	}
	if verbose {
		for _, d := range n.detail {
			fmt.Fprintf(w, "corepin: note: %s\n", d)
		}
		return
	}
	fmt.Fprintf(w, "corepin: note: %s; -v for details\n", strings.Join(n.short, "; "))
}
