package jobs

import (
	"fmt"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/sim"
)

// gap separates a departure from the next arrival, so a replay frees a
// pod's CPUs before the next wave asks for them.
const gap = 0.001

// Trace returns the sweep as a `corepin simulate` trace: the Jobs one after
// another, as a driver applying them in order runs them, each Job's pods in
// waves of Parallel, each pod holding its CPUs (an exclusive LSE request,
// else an LS quota) for JobSeconds. Replaying it over the cluster's node
// topologies shows which points the nodes can place, and how well, before
// anything runs.
func (s *Sweep) Trace() []sim.Event {
	d := s.JobSeconds
	if d <= 0 {
		d = 1
	}
	var evs []sim.Event
	t := 0.0
	for _, j := range s.Jobs {
		name := s.name(j)
		for first := 0; first < j.Pods; first += j.Parallel {
			var ids []string
			for p := first; p < min(first+j.Parallel, j.Pods); p++ {
				id := fmt.Sprintf("%s-%d", name, p)
				r := alloc.Request{ID: id, QoS: alloc.QoS(j.QoS)}
				if j.QoS == string(alloc.LSE) {
					r.CPUs = int(j.MilliCPU / 1000)
				} else {
					r.MilliCPUs = int(j.MilliCPU)
				}
				evs = append(evs, sim.Event{T: t, Op: sim.Arrive, ID: id, Request: r})
				ids = append(ids, id)
			}
			t += d
			for _, id := range ids {
				evs = append(evs, sim.Event{T: t, Op: sim.Depart, ID: id})
			}
			t += gap
		}
	}
	return evs
}
