package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/nodecore"
	"github.com/corepin/corepin/topology"
	"github.com/corepin/corepin/wakescan"
)

// DefaultState is the agent's state file when neither flag nor config
// names one (nodecore.DefaultState, shared with the NRI plugin and runs).
const DefaultState = nodecore.DefaultState

// DefaultReconcileInterval is how often a running agent reconciles.
const DefaultReconcileInterval = 10 * time.Second

// Run is the daemon: it discovers the machine, detects the cgroup driver
// under c.CgroupRoot, opens the Node (reconciling), serves the API on the
// unix socket c.Socket (and on c.Listen with a bearer token), reconciles
// every c.ReconcileInterval, and returns when ctx ends, after a graceful
// shutdown. ready, if not nil, is called once the API accepts requests.
func Run(ctx context.Context, c Config, log *slog.Logger, ready func()) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if c.Socket == "" {
		c.Socket = DefaultSocket
	}
	if c.State == "" {
		c.State = DefaultState
	}
	if c.CgroupRoot == "" {
		c.CgroupRoot = DefaultCgroupRoot
	}
	if c.ReconcileInterval == 0 {
		c.ReconcileInterval = DefaultReconcileInterval
	}
	// Before anything is made: no cgroup root, no state, no directory.
	for _, p := range []struct{ flag, path string }{{"--socket", c.Socket}, {"--state", c.State}} {
		if err := checkPlace(p.flag, p.path); err != nil {
			return err
		}
	}
	var token string
	if c.TokenFile != "" {
		b, err := os.ReadFile(c.TokenFile)
		if err != nil {
			return fmt.Errorf("%w: reading token_file: %v", ErrInvalid, err)
		}
		token = strings.TrimSpace(string(b))
		if len(token) < 16 {
			return fmt.Errorf("%w: token_file %s holds a token shorter than 16 characters", ErrInvalid, c.TokenFile)
		}
	}
	ac, _ := c.Settings()
	topo, err := topology.Discover(os.DirFS("/"))
	if err != nil {
		return fmt.Errorf("discovering the topology: %w", err)
	}
	drv, err := enforce.Detect(enforce.WithRoot(c.CgroupRoot))
	if err != nil {
		return fmt.Errorf("detecting cgroups: %w", err)
	}
	m := NewMetrics()
	m.WatchScheduler(ReadScheduler)
	n, err := Open(Options{StatePath: c.State, Topology: topo, Alloc: ac, Driver: drv, Logger: log, Observer: m,
		RunGroups: &runGroups{}, CgroupRoot: c.CgroupRoot,
		Online: nodecore.OnlineFrom(os.DirFS("/"))})
	if err != nil {
		return err
	}
	defer n.Close()
	mode, _ := wakescan.ParseMode(c.WakeScan)
	ws, err := openWakeScan(mode, c.State, "/", log)
	if err != nil {
		return err
	}
	defer ws.Close()
	irqs, err := openIRQs(c.State, "/", log)
	if err != nil {
		return err
	}
	defer irqs.Close()
	sx, err := openSchedExt(c.SchedExt, c.State, "/", log, m)
	if err != nil {
		return err
	}
	defer sx.Close()
	n.changed = func() {
		all := n.List()
		ws.Sync(hasBE(all))
		irqs.Sync(all)
	}
	// One reconcile before the API answers, so that the first answers
	// already say what the machine holds (offline CPUs, runs gone).
	sweep(n, log)
	n.changed()
	log.Info("agent started", "socket", c.Socket, "state", c.State, "driver", drv.Name(), "cgroup_root", c.CgroupRoot,
		"machine", topo.Summary(), "workloads", len(n.List()))
	if note := hostDynModsNote(drv.Name()); note != "" {
		log.Info("admission latency", "note", note)
	}
	s := &Server{Node: n, Metrics: m, Log: log, Scheduler: ReadScheduler, SchedExt: sx.Status}
	ln, err := ListenUnix(c.Socket)
	if err != nil {
		return err
	}
	defer os.Remove(c.Socket)
	lns := []net.Listener{ln}
	if c.Listen != "" {
		tl, err := net.Listen("tcp", c.Listen)
		if err != nil {
			ln.Close()
			return fmt.Errorf("listening on %s: %w", c.Listen, err)
		}
		lns = append(lns, tl)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if c.QoS.Enabled {
		if err := n.StartQoS(ctx, c.QoS); err != nil {
			return err
		}
		log.Info("qos controller started", "mechanism", c.QoS.WithDefaults().Mechanism, "slice", c.QoS.Slice, "burst", c.QoS.Burst)
	}
	errc := make(chan error, len(lns))
	for i, l := range lns {
		srv := s
		if i > 0 {
			srv = &Server{Node: n, Metrics: m, Log: log, Token: token, Scheduler: ReadScheduler, SchedExt: sx.Status}
		}
		go func() { errc <- srv.Serve(ctx, l) }()
	}
	if ready != nil {
		ready()
	}
	tick := time.NewTicker(c.ReconcileInterval)
	defer tick.Stop()
	var errs []error
	for pending := len(lns); pending > 0; {
		select {
		case <-tick.C:
			sweep(n, log)
			n.changed()
		case err := <-errc:
			pending--
			if err != nil && !errors.Is(err, net.ErrClosed) {
				errs = append(errs, err)
			}
			cancel() // one listener failing stops the others
		}
	}
	sx.stopIfRemoved(c.Reload, log)
	log.Info("agent stopped; workloads keep running")
	return errors.Join(errs...)
}

// sweep is one periodic tick of a running agent: it releases what is
// gone (Sweep: its own workloads' and dead runs' reservations), brings in
// what other processes committed (Refresh), then reports workloads whose
// CPUs went offline or came back (CheckOnline).
func sweep(n *Node, log *slog.Logger) {
	if _, err := n.Sweep(); err != nil {
		log.Warn("sweep", "err", err)
	}
	if err := n.Refresh(); err != nil {
		log.Warn("refresh", "err", err)
	}
	if _, err := n.CheckOnline(); err != nil {
		log.Warn("checking online cpus", "err", err)
	}
}

// runGroups lists the groups of local runs' jobs as `corepin run`'s
// driver makes them: enforce.Detect with the default root. Only pinned
// runs hold reservations, and they are never best-effort (BE batches,
// under their own root, are refused --mode pinned), so that root is the
// only one. The driver is detected at the first List, which Sweep calls
// only once a run died holding CPUs: an agent on a node where no run ever
// crashed creates no root of the runs'. A driver that cannot list groups
// (affinity-only) is an error, so that no reservation is released while
// its job might still run.
type runGroups struct {
	mu sync.Mutex
	l  enforce.Lister
}

func (r *runGroups) List() ([]enforce.Listed, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.l == nil {
		d, err := enforce.Detect(enforce.WithRoot(enforce.DefaultRoot))
		if err != nil {
			return nil, fmt.Errorf("detecting the runs' cgroup driver: %w", err)
		}
		l, ok := d.(enforce.Lister)
		if !ok {
			return nil, fmt.Errorf("the runs' driver %s cannot list their groups (%s); keeping dead runs' CPUs",
				d.Name(), strings.Join(d.Limitations(), "; "))
		}
		r.l = l
	}
	return r.l.List()
}

// checkPlace refuses a state file or socket path on a kernel file system
// (nodecore.CheckPlace), suggesting the agent's default instead.
func checkPlace(flag, path string) error {
	example := DefaultState
	if flag == "--socket" {
		example = DefaultSocket
	}
	return nodecore.CheckPlace(flag, path, example)
}
