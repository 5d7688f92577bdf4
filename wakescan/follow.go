package wakescan

import (
	"errors"
	"log/slog"
	"sync"

	"github.com/corepin/corepin/store"
)

// Follower keeps the setting for a daemon that knows whether its node has
// BE work (the agent, the NRI plugin): with Full it holds the switch while
// Sync is told of BE work and releases it otherwise; with either mode,
// each Sync undoes what holders that died left (a crashed daemon or run),
// once no live holder is left. Where the features file can not be
// switched, OpenFollower says so once in the log and the follower holds
// nothing. Errors of a Sync are logged, each once until another is seen.
type Follower struct {
	mode Mode
	db   *store.DB
	scan *Scan
	log  *slog.Logger

	mu      sync.Mutex
	lastErr string
}

// OpenFollower returns the follower of holder name over db (which it
// closes at Close) for the machine whose "/" is root, and undoes what a
// crashed holder left (a first Sync without BE work).
func OpenFollower(db *store.DB, mode Mode, root, name string, log *slog.Logger) (*Follower, error) {
	scan, err := New(db, Options{Root: root, Name: name})
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := &Follower{mode: mode, db: db, scan: scan, log: log}
	if mode == Full {
		if err := Probe(root); err != nil {
			log.Warn("wake_scan full changes nothing on this machine; BE work runs as usual", "why", err.Error())
			f.mode = Default
		}
	}
	f.Sync(false)
	return f, nil
}

// Sync holds the switch if be (BE work runs on the node) and the mode is
// Full, else releases it.
func (f *Follower) Sync(be bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var act Action
	var err error
	if be && f.mode == Full {
		act, err = f.scan.Hold()
	} else {
		act, err = f.scan.Release()
	}
	f.report(act, err)
}

func (f *Follower) report(act Action, err error) {
	if err != nil {
		if msg := err.Error(); msg != f.lastErr {
			f.lastErr = msg
			f.log.Warn("wake_scan", "err", msg)
		}
		return
	}
	f.lastErr = ""
	switch act {
	case Off:
		f.log.Info("wake_scan full: SIS_UTIL off while BE work runs", "action", string(act))
	case Restored:
		f.log.Info("wake_scan: scheduler features restored to the value found", "action", string(act))
	}
}

// Close releases the switch (the value found is restored unless another
// holder still runs) and closes the state file.
func (f *Follower) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	act, err := f.scan.Release()
	f.report(act, err)
	return errors.Join(err, f.db.Close())
}
