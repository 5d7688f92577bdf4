package agent

import (
	"errors"
	"log/slog"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corepin/corepin/nodecore"
	"github.com/corepin/corepin/schedext"
)

// schedExt is the agent's side of the node setting sched_ext: the
// supervisor of scx_layered (package schedext) while the setting asks
// for it, over a connection of its own to the state file, which holds
// the record of the running scx_layered.
type schedExt struct {
	sup   *schedext.Supervisor
	o     schedext.Options
	close func() error
}

// openSchedExt starts supervising scx_layered when set asks for it, its
// files (the layer config, its output) beside the state file, reading
// sched_ext's state under root (the machine's "/"). With the
// setting off it stops the scx_layered an earlier agent left running
// and recorded (the setting was removed), and holds nothing.
func openSchedExt(set schedext.Setting, state, root string, log *slog.Logger, obs schedext.Observer) (*schedExt, error) {
	set, err := set.Validate()
	if err != nil {
		return nil, err
	}
	db, err := nodecore.OpenState(state)
	if err != nil {
		return nil, err
	}
	o := schedext.Options{Binary: set.Binary, Args: set.Args, Dir: filepath.Dir(state), Root: root, Records: schedext.StateRecords(db),
		Log: log, Observer: obs}
	if !set.Enabled() {
		did, err := schedext.StopRecorded(o)
		if did != "" {
			log.Info("sched_ext off: "+did+"; the fair class decides", "setting", "sched_ext")
		}
		if err != nil {
			log.Warn("sched_ext off: stopping the scx_layered an earlier agent started", "err", err.Error())
		}
		return &schedExt{}, db.Close()
	}
	sup, err := schedext.Supervise(o)
	if err != nil {
		db.Close()
		return nil, err
	}
	log.Info("sched_ext layered: supervising scx_layered", "binary", set.Binary, "config", filepath.Join(o.Dir, schedext.ConfigFile),
		"log", filepath.Join(o.Dir, schedext.LogFile))
	return &schedExt{sup: sup, o: o, close: func() error { return errors.Join(sup.Close(), db.Close()) }}, nil
}

// Status is the supervisor's status, nil with the setting off.
func (x *schedExt) Status() *schedext.Status {
	if x == nil || x.sup == nil {
		return nil
	}
	st := x.sup.Status()
	return &st
}

// stopIfRemoved is the agent's clean stop with the setting removed: when
// reload (the config file read again) no longer asks for a scheduler, it
// stops supervising and stops scx_layered (SIGINT, SIGKILL after the
// bound) and deletes its record. Otherwise, or when the file cannot be
// read, scx_layered keeps running for the next agent.
func (x *schedExt) stopIfRemoved(reload func() (Config, error), log *slog.Logger) {
	if x == nil || x.sup == nil || reload == nil {
		return
	}
	c, err := reload()
	if err != nil {
		log.Warn("sched_ext: reading the config again at stop; scx_layered keeps running", "err", err.Error())
		return
	}
	if c.SchedExt.Enabled() {
		return
	}
	x.sup.Close()
	did, err := schedext.StopRecorded(x.o)
	if did != "" {
		log.Info("sched_ext removed from the config: "+did+"; the fair class decides", "setting", "sched_ext")
	}
	if err != nil {
		log.Warn("sched_ext removed from the config: stopping scx_layered", "err", err.Error())
	}
}

// Close stops supervising; scx_layered keeps running for the next agent.
func (x *schedExt) Close() error {
	if x == nil || x.close == nil {
		return nil
	}
	return x.close()
}

// schedExtMetrics are the supervisor's metrics.
type schedExtMetrics struct {
	state       *prometheus.GaugeVec
	transitions *prometheus.CounterVec
	restarts    prometheus.Counter
}

func newSchedExtMetrics() schedExtMetrics {
	return schedExtMetrics{
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "corepin_sched_ext_route_state",
			Help: "The layered route's supervisor (node setting sched_ext): 1 for its state (off, unavailable, starting, attached, " +
				"ejected, down, foreign) and what decides (the attached BPF scheduler, or fair: the fair class and its BE routes).",
		}, []string{"state", "decides"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "corepin_sched_ext_route_transitions_total",
			Help: "Transitions of the layered route's supervisor, by state entered and reason (started, restarted, adopted, attached, " +
				"refused, exited, killed, ejected, attach_timeout, start_failed, stale_record, config_changed, foreign, unavailable).",
		}, []string{"to", "reason"}),
		restarts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "corepin_sched_ext_route_restarts_total",
			Help: "Starts of scx_layered after a failure.",
		}),
	}
}

// Transitioned records a transition of the sched_ext supervisor
// (schedext.Observer).
func (m *Metrics) Transitioned(t schedext.Transition, st schedext.Status) {
	if m == nil {
		return
	}
	m.schedExt.state.Reset()
	m.schedExt.state.WithLabelValues(st.State, st.Decides).Set(1)
	m.schedExt.transitions.WithLabelValues(t.To, t.Reason).Inc()
	if t.Reason == schedext.ReasonRestarted {
		m.schedExt.restarts.Inc()
	}
}

var _ schedext.Observer = (*Metrics)(nil)
