package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/corepin/corepin/enforce"
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

// addDriver notes what driver cannot enforce here (its Limitations), in a
// few words: for the affinity driver, that it pins without cgroups and,
// where this user may not lower a nice, that jobs keep theirs; for a
// cgroup driver, the files it lacks.
func (n *runNotes) addDriver(d enforce.Driver) {
	limits := d.Limitations()
	if len(limits) == 0 {
		return
	}
	if d.Name() != enforce.NameAffinity {
		var lacks []string
		for _, l := range limits {
			lacks = append(lacks, cutWords(l))
		}
		n.add(d.Name()+": "+strings.Join(lacks, ", "), limits...)
		return
	}
	short := "affinity driver"
	if strings.HasPrefix(limits[0], "no usable cgroup") {
		short = "no usable cgroup"
	}
	short += ": affinity only (no quota or stats)"
	if l, err := enforce.ProbeNice(); err == nil && l.Lowest > 19 {
		short += ", jobs keep this process's scheduling"
	} else if err == nil && l.Note() != "" {
		short += fmt.Sprintf(", jobs keep nice %d", l.Lowest)
	}
	n.add(short, limits...)
}

// cutWords is the head of a limitation, up to its first parenthesis or
// colon: "no cpu.idle (Linux < 5.15): ..." is "no cpu.idle".
func cutWords(s string) string {
	if i := strings.IndexAny(s, "(:"); i > 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}
