package schedext

import (
	"fmt"
	"strings"
	"time"
)

// Lines says what the supervisor's status means, for `corepin ctl top`:
// what decides (and, while a BPF scheduler is attached, which BE routes
// cannot act), then the last transition with its reason.
func (s Status) Lines() []string {
	pid := ""
	if s.PID > 0 {
		pid = fmt.Sprintf(" (pid %d", s.PID)
		if s.Adopted {
			pid += ", adopted"
		}
		pid += ")"
	}
	inert := "none"
	if len(s.InertRoutes) > 0 {
		inert = strings.Join(s.InertRoutes, ", ")
	}
	fairAgain := "the fair class decides and its BE routes act again"
	var l string
	switch s.State {
	case StateAttached:
		l = fmt.Sprintf("scx_layered%s attached: %s decides; BE routes that cannot act: %s", pid, s.Decides, inert)
	case StateStarting:
		l = fmt.Sprintf("scx_layered%s starting: the fair class decides until it attaches", pid)
	case StateEjected:
		l = fmt.Sprintf("scx_layered%s ejected by the kernel: %s", pid, fairAgain)
	case StateDown:
		l = "scx_layered down: " + fairAgain
		if s.NextStart != nil {
			l += fmt.Sprintf("; next start in %s", max(time.Until(*s.NextStart), 0).Round(time.Second).String())
		}
	case StateForeign:
		l = fmt.Sprintf("%s, a scheduler corepin did not start, decides; corepin starts none; BE routes that cannot act: %s", s.Decides, inert)
	case StateUnavailable:
		l = "no sched_ext in this kernel: the fair class decides"
	default:
		l = s.State + ": " + s.Decides + " decides"
	}
	out := []string{fmt.Sprintf("sched_ext %s route: %s (restarts %d, failures in a row %d)", s.Mode, l, s.Restarts, s.Failures)}
	if t := s.Last; t != nil {
		d := ""
		if t.Detail != "" {
			d = ": " + t.Detail
		}
		out = append(out, fmt.Sprintf("  last transition %s %s -> %s, %s%s", t.At.Format(time.TimeOnly), t.From, t.To, t.Reason, d))
	}
	return out
}
