package agent

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/irq"
	"github.com/corepin/corepin/nodecore"
	"github.com/corepin/corepin/store"
)

// irqFollower keeps the CPUs of the agent's irq_isolate workloads clear
// of movable device interrupts (package irq, holder "agent", one id per
// workload) over a connection of its own to the state file: each Sync
// makes what it holds exactly those workloads' CPUs, and undoes what
// holders that died left (a crashed agent's workloads that are gone, a
// killed run's jobs). Where /proc/irq cannot be written, openIRQs says
// so once in the log and the follower steers nothing. Errors of a Sync
// are logged, each once until another is seen.
type irqFollower struct {
	db    *store.DB
	steer *irq.Steer // nil: interrupts cannot be steered here
	log   *slog.Logger

	mu      sync.Mutex
	lastErr string
	said    map[int]bool
}

// openIRQs opens the agent's irq follower on the state file at state for
// the machine whose "/" is root.
func openIRQs(state, root string, log *slog.Logger) (*irqFollower, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := &irqFollower{log: log, said: map[int]bool{}}
	if err := irq.Probe(root); err != nil {
		log.Info("irq_isolate workloads keep the interrupts where they are on this machine", "why", err.Error())
		return f, nil
	}
	db, err := nodecore.OpenState(state)
	if err != nil {
		return nil, err
	}
	steer, err := irq.New(db, irq.Options{Root: root, Name: "agent", BannedFile: nodecore.BannedFile(root)})
	if err != nil {
		db.Close()
		return nil, err
	}
	f.db, f.steer = db, steer
	if n := nodecore.IrqbalanceNote(root); n != "" {
		log.Warn("irq_isolate: " + n)
	}
	return f, nil
}

// Sync keeps the CPUs of ws's irq_isolate workloads clear, and only
// those.
func (f *irqFollower) Sync(ws []Workload) {
	held := map[string]cpuset.CPUSet{}
	for _, w := range ws {
		if !w.IRQIsolate || w.Deleting {
			continue
		}
		if c, err := cpuset.Parse(w.Cpuset); err == nil && !c.IsEmpty() {
			held[w.Name] = c
		}
	}
	f.sync(held)
}

func (f *irqFollower) sync(held map[string]cpuset.CPUSet) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.steer == nil {
		return
	}
	rep, err := f.steer.Sync(held)
	if err != nil {
		if msg := err.Error(); msg != f.lastErr {
			f.lastErr = msg
			f.log.Warn("irq_isolate", "err", msg)
		}
		return
	}
	f.lastErr = ""
	if len(rep.Moved)+len(rep.Restored) > 0 {
		f.log.Info("irq_isolate: interrupts steered", "kept_clear", rep.Kept.String(), "moved", fmt.Sprint(rep.Moved), "restored", fmt.Sprint(rep.Restored))
	}
	var left []int
	for _, r := range rep.Refused {
		if !f.said[r.IRQ] {
			f.said[r.IRQ] = true
			left = append(left, r.IRQ)
		}
	}
	var stuck []int
	for _, n := range rep.Stuck {
		if !f.said[n] {
			f.said[n] = true
			stuck = append(stuck, n)
		}
	}
	if len(left)+len(stuck) > 0 {
		f.log.Info("irq_isolate: interrupts left where they are", "refused_by_kernel", fmt.Sprint(left), "only_on_kept_clear_cpus", fmt.Sprint(stuck))
	}
}

// Close gives every interrupt back (the affinities found, less what
// other live holders keep clear) and closes the state file.
func (f *irqFollower) Close() error {
	f.sync(nil)
	if f.db == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return errors.Join(f.db.Close())
}
