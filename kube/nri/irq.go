package nri

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/containerd/nri/pkg/api"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/irq"
	"github.com/corepin/corepin/nodecore"
	"github.com/corepin/corepin/store"
)

// IRQMode is the node setting irq_isolate of the plugin (corepin nri
// --irq-isolate, the chart's irqIsolate): which exclusive containers
// (LSE, LSR) have movable device interrupts kept off their CPUs. The
// plugin only records the choice in each container's assignment
// (nodecore.Spec.IRQIsolate); RunIRQSync, in a container of its own that
// may write the host's /proc/irq, steers the interrupts.
type IRQMode string

// The irq_isolate node settings.
const (
	// IRQOff: no container's interrupts are steered; a pod annotated
	// corepin.io/irq-isolate: "true" runs and the plugin logs why nothing
	// is done for it.
	IRQOff IRQMode = "off"
	// IRQPod: the exclusive containers of pods annotated
	// corepin.io/irq-isolate: "true".
	IRQPod IRQMode = "pod"
	// IRQExclusive: every exclusive container, but those of pods
	// annotated corepin.io/irq-isolate: "false".
	IRQExclusive IRQMode = "exclusive"
)

// ParseIRQMode reads the node setting: off, pod or exclusive ("" is off).
func ParseIRQMode(s string) (IRQMode, error) {
	switch m := IRQMode(s); m {
	case "":
		return IRQOff, nil
	case IRQOff, IRQPod, IRQExclusive:
		return m, nil
	}
	return "", fmt.Errorf("irq_isolate %.20q: want off, pod or exclusive", s)
}

// holds reports whether a container of class q whose pod said said
// (nil: nothing) of corepin.io/irq-isolate has its CPUs kept clear.
func (m IRQMode) holds(q alloc.QoS, said *bool) bool {
	if q != alloc.LSE && q != alloc.LSR {
		return false
	}
	switch m {
	case IRQPod:
		return said != nil && *said
	case IRQExclusive:
		return said == nil || *said
	}
	return false
}

// irqIsolate sets s.IRQIsolate as the node setting decides for a
// container of pod (whose annotations SpecOf has checked), and logs a
// pod's ask the node does not honour.
func (p *Plugin) irqIsolate(pod *api.PodSandbox, s *nodecore.Spec) {
	var said *bool
	if a, ok := pod.GetAnnotations()[AnnotationIRQIsolate]; ok {
		on := a == "true"
		said = &on
	}
	s.IRQIsolate = p.irqMode.holds(alloc.QoS(s.QoS), said)
	if said != nil && *said && p.irqMode == IRQOff {
		p.log.Warn("pod asks for interrupts kept off its CPUs, which this node does not do (corepin nri --irq-isolate off; the chart's irqIsolate): they stay where they are",
			"pod", pod.GetNamespace()+"/"+pod.GetName(), "annotation", AnnotationIRQIsolate)
	}
}

// IRQHolder is the holder name of RunIRQSync in the state file's
// irq_isolate record; IRQHoldID the one id it holds the union of the
// containers' CPUs under (one id whatever the count of containers: a
// record's holders are bounded, irq.MaxHolders).
const (
	IRQHolder = "nri"
	IRQHoldID = "containers"
)

// IRQHolds is the union of the CPUs of the exclusive containers the
// plugin admitted with irq_isolate (nodecore.Spec.IRQIsolate), read from
// the state file's assignments.
func IRQHolds(db *store.DB) (cpuset.CPUSet, error) {
	as, err := db.Assignments()
	if err != nil {
		return cpuset.CPUSet{}, fmt.Errorf("reading the assignments: %w", err)
	}
	var b cpuset.Builder
	for _, a := range as {
		rec, _, err := nodecore.DecodeAssignment(a)
		if err != nil {
			return cpuset.CPUSet{}, err
		}
		if rec.Container == nil || !rec.IRQIsolate || rec.Deleting || (alloc.QoS(a.QoS) != alloc.LSE && alloc.QoS(a.QoS) != alloc.LSR) {
			continue
		}
		c, err := cpuset.Parse(a.Cpuset)
		if err != nil {
			return cpuset.CPUSet{}, fmt.Errorf("reading the cpuset of %s: %w", a.Name, err)
		}
		b.AddSet(c)
	}
	return b.Result(), nil
}

// IRQSyncOptions configure RunIRQSync.
type IRQSyncOptions struct {
	// State is the plugin's state file.
	State string
	// Root is the host's root as seen here, holding proc/irq (writable)
	// and run/corepin (irqbalance's banned CPUs, irq.DefaultBannedFile):
	// "" is "/", the chart's is /host.
	Root string
	// Proc is the procfs of the host's PID namespace (the holders'
	// identities, irqbalance): "" is /proc.
	Proc string
	// Interval is how often the state file is read (default
	// DefaultIRQInterval); a change of the CPUs held steers at once.
	Interval time.Duration
	// Resync is how often the interrupts are steered again though
	// nothing changed (default DefaultIRQResync): an interrupt irqbalance
	// moved back, a device added.
	Resync time.Duration
	// Logger gets structured logs; nil discards them.
	Logger *slog.Logger
}

// Defaults of RunIRQSync.
const (
	DefaultIRQInterval = time.Second
	DefaultIRQResync   = 10 * time.Second // irqbalance's own interval
)

// RunIRQSync keeps the CPUs of the containers the plugin admitted with
// irq_isolate clear of movable device interrupts (package irq, holder
// IRQHolder on the state file's shared record) until ctx ends, then
// gives the interrupts back. It reads the state file every Interval and
// steers when the CPUs held change, and every Resync besides. Where
// Root's /proc/irq cannot be written it fails at once, saying why. A
// holder that died (a killed RunIRQSync) is undone by the next one's
// first sync, which keeps the CPUs of containers still running clear
// without a moment of restore.
func RunIRQSync(ctx context.Context, o IRQSyncOptions) error {
	if o.Interval <= 0 {
		o.Interval = DefaultIRQInterval
	}
	if o.Resync <= 0 {
		o.Resync = DefaultIRQResync
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := irq.Probe(o.Root); err != nil {
		return fmt.Errorf("steering interrupts: %w", err)
	}
	db, err := nodecore.OpenState(o.State)
	if err != nil {
		return err
	}
	defer db.Close()
	f, err := nodecore.OpenIRQFollower(o.State, irq.Options{Root: o.Root, Proc: o.Proc, Name: IRQHolder, BannedFile: nodecore.BannedFile(o.Root)}, log)
	if err != nil {
		return err
	}
	defer f.Close() // gives the interrupts back
	log.Info("irq sync started", "state", o.State, "root", o.Root, "interval", o.Interval, "resync", o.Resync)
	var last cpuset.CPUSet
	var at time.Time
	synced, lastErr := false, ""
	tick := time.NewTicker(o.Interval)
	defer tick.Stop()
	for {
		cpus, err := IRQHolds(db)
		switch {
		case err != nil:
			if err.Error() != lastErr {
				lastErr = err.Error()
				log.Warn("irq sync: reading the state", "err", err)
			}
		case !synced || !cpus.Equals(last) || time.Since(at) >= o.Resync:
			lastErr = ""
			held := map[string]cpuset.CPUSet{}
			if !cpus.IsEmpty() {
				held[IRQHoldID] = cpus
			}
			if f.Sync(held) == nil {
				if !synced || !cpus.Equals(last) {
					log.Info("irq sync: containers' CPUs kept clear", "cpus", cpus.String())
				}
				last, at, synced = cpus, time.Now(), true
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}
