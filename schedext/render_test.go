package schedext_test

import (
	"strings"
	"testing"
	"time"

	"github.com/corepin/corepin/schedext"
)

// TestStatusLines: ctl top's words for each state say what decides, the
// inert routes while a BPF scheduler is attached, that the fair class's
// routes act again while scx_layered is down or ejected, and the last
// transition with its reason.
func TestStatusLines(t *testing.T) {
	at := time.Date(2026, 11, 28, 14, 2, 11, 0, time.UTC)
	last := &schedext.Transition{At: at, From: "starting", To: "down", Reason: "refused", Detail: "pid 7 exit status 1"}
	inert := []string{"cpu_idle", "idle_parent", "weight"}
	for _, tc := range []struct {
		name string
		st   schedext.Status
		want []string
	}{
		{"attached", schedext.Status{Mode: "layered", State: "attached", Decides: "layered_1.1.4_x", InertRoutes: inert, PID: 9, Adopted: true, Restarts: 2, Failures: 1},
			[]string{"sched_ext layered route: scx_layered (pid 9, adopted) attached: layered_1.1.4_x decides; BE routes that cannot act: cpu_idle, idle_parent, weight (restarts 2, failures in a row 1)"}},
		{"down", schedext.Status{Mode: "layered", State: "down", Decides: "fair", InertRoutes: []string{}, Failures: 3, Last: last},
			[]string{"sched_ext layered route: scx_layered down: the fair class decides and its BE routes act again (restarts 0, failures in a row 3)",
				"  last transition 14:02:11 starting -> down, refused: pid 7 exit status 1"}},
		{"ejected", schedext.Status{Mode: "layered", State: "ejected", Decides: "fair", PID: 9},
			[]string{"sched_ext layered route: scx_layered (pid 9) ejected by the kernel: the fair class decides and its BE routes act again (restarts 0, failures in a row 0)"}},
		{"foreign", schedext.Status{Mode: "layered", State: "foreign", Decides: "rusty_1.0", InertRoutes: inert},
			[]string{"sched_ext layered route: rusty_1.0, a scheduler corepin did not start, decides; corepin starts none; BE routes that cannot act: cpu_idle, idle_parent, weight (restarts 0, failures in a row 0)"}},
		{"unavailable", schedext.Status{Mode: "layered", State: "unavailable", Decides: "fair"},
			[]string{"sched_ext layered route: no sched_ext in this kernel: the fair class decides (restarts 0, failures in a row 0)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.st.Lines(); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("Lines() =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}
