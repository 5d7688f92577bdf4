package cli

import (
	"bytes"
	"testing"
)

// runNotes says everything in one line, each note in full with -v.
func TestRunNotesPrint(t *testing.T) {
	var n runNotes
	var none bytes.Buffer
	n.print(&none, false)
	if none.Len() != 0 {
		t.Errorf("no notes printed %q, want nothing", none.String())
	}
	n.add("results not recorded (give --db)", "results are not recorded: permission denied")
	n.add("cgroup-v1: no cpu.idle", "no cpu.idle (Linux < 5.15): Idle is approximated", "second detail")
	for _, tc := range []struct {
		name    string
		verbose bool
		want    string
	}{
		{name: "one line", want: "corepin: note: results not recorded (give --db); cgroup-v1: no cpu.idle; -v for details\n"},
		{name: "verbose", verbose: true, want: "corepin: note: results are not recorded: permission denied\n" +
			"corepin: note: no cpu.idle (Linux < 5.15): Idle is approximated\ncorepin: note: second detail\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			n.print(&b, tc.verbose)
			if b.String() != tc.want {
				t.Errorf("print() = %q, want %q", b.String(), tc.want)
			}
		})
	}
}
