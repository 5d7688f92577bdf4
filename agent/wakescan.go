package agent

import (
	"errors"
	"log/slog"
	"slices"
	"sync"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/nodecore"
	"github.com/corepin/corepin/store"
	"github.com/corepin/corepin/wakescan"
)

// wakeScan keeps the node setting wake_scan for the agent (package
// wakescan): with full, it holds the switch (SIS_UTIL off) while the node
// has a BE workload and releases it when the last one ends and when the
// agent stops; whatever the setting, each sync undoes what holders that
// died left (a crashed agent or run), once no live holder is left. Where
// the features file cannot be switched, it says so once and holds
// nothing.
type wakeScan struct {
	mode wakescan.Mode
	db   *store.DB
	scan *wakescan.Scan
	log  *slog.Logger

	mu      sync.Mutex
	lastErr string
}

// openWakeScan opens the switch of the machine whose "/" is root over the
// state file at state, and undoes what a crashed holder left.
func openWakeScan(mode wakescan.Mode, state, root string, log *slog.Logger) (*wakeScan, error) {
	db, err := nodecore.OpenState(state)
	if err != nil {
		return nil, err
	}
	scan, err := wakescan.New(db, wakescan.Options{Root: root, Name: "agent"})
	if err != nil {
		db.Close()
		return nil, err
	}
	w := &wakeScan{mode: mode, db: db, scan: scan, log: log}
	if mode == wakescan.Full {
		if err := wakescan.Probe(root); err != nil {
			log.Warn("wake_scan full changes nothing on this machine; BE workloads run as usual", "why", err.Error())
			w.mode = wakescan.Default
		}
	}
	w.sync(nil)
	return w, nil
}

// sync holds the switch while ws has a BE workload (with full), else
// releases it (undoing what dead holders left). Errors are logged, each
// once until another is seen.
func (w *wakeScan) sync(ws []Workload) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	want := w.mode == wakescan.Full && slices.ContainsFunc(ws, func(x Workload) bool { return x.QoS == string(alloc.BE) })
	var act wakescan.Action
	var err error
	if want {
		act, err = w.scan.Hold()
	} else {
		act, err = w.scan.Release()
	}
	w.report(act, err)
}

func (w *wakeScan) report(act wakescan.Action, err error) {
	if err != nil {
		if msg := err.Error(); msg != w.lastErr {
			w.lastErr = msg
			w.log.Warn("wake_scan", "err", msg)
		}
		return
	}
	w.lastErr = ""
	switch act {
	case wakescan.Off:
		w.log.Info("wake_scan full: SIS_UTIL off while BE workloads run", "action", string(act))
	case wakescan.Restored:
		w.log.Info("wake_scan: scheduler features restored to the value found", "action", string(act))
	}
}

// close releases the switch (the agent stops: the value found is
// restored unless another holder still runs) and closes the state file.
func (w *wakeScan) close() error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	act, err := w.scan.Release()
	w.report(act, err)
	w.mu.Unlock()
	return errors.Join(err, w.db.Close())
}
