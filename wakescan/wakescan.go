package wakescan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/corepin/corepin/measure"
	"github.com/corepin/corepin/store"
	"github.com/corepin/corepin/topology"
)

// Mode is the node setting wake_scan.
type Mode string

// The modes of wake_scan.
const (
	// Default leaves the scheduler's features as they are.
	Default Mode = "default"
	// Full turns SIS_UTIL off while BE work runs.
	Full Mode = "full"
)

// Modes are the names ParseMode takes, for errors and flag help.
var Modes = []string{string(Default), string(Full)}

// Feature is the scheduler feature Full turns off: the idle-CPU scan sized
// by the L3's utilisation (Linux 6.0).
const Feature = "SIS_UTIL"

// SettingKey is the state file's settings key of the record.
const SettingKey = "wake_scan"

// MaxHolders bounds the holders one record keeps (an agent, the NRI
// plugin and one per concurrent BE run).
const MaxHolders = 1024

// ErrUnavailable is wrapped by Probe's error where the features file can
// not be changed here; topology.ErrBadFeatures where it is malformed.
var ErrUnavailable = errors.New("the scheduler's features cannot be changed here")

// ParseMode reads a wake_scan value; "" is Default. An unknown value's
// error names the choices.
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case "", Default:
		return Default, nil
	case Full:
		return Full, nil
	}
	return "", fmt.Errorf("wake_scan %.64q: want %s", s, strings.Join(Modes, " or "))
}

// Probe says whether the features file under root ("" or "/": this
// machine) can be switched: nil when it is a readable, well-formed,
// writable regular file naming SIS_UTIL. Otherwise the error says why
// and what to do, wrapping ErrUnavailable or topology.ErrBadFeatures.
func Probe(root string) error {
	r, err := openRoot(root)
	if err != nil {
		return err
	}
	defer r.Close()
	_, err = probe(r, root)
	return err
}

func openRoot(root string) (*os.Root, error) {
	if root == "" {
		root = "/"
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, &ProbeError{Short: "root " + root + " unreadable", Err: fmt.Errorf("%w: opening root %s: %w", ErrUnavailable, root, err)}
	}
	return r, nil
}

// ProbeError is Probe's error: Short says why in a few words with what
// to do, for a one-line note; the error itself says it in full.
type ProbeError struct {
	Short string
	Err   error
}

func (e *ProbeError) Error() string { return e.Err.Error() }
func (e *ProbeError) Unwrap() error { return e.Err }

// probe reads SIS_UTIL under r and checks the file is writable.
func probe(r *os.Root, root string) (bool, error) {
	path := filepath.Join(root, topology.SchedFeaturesFile)
	fail := func(short string, err error) (bool, error) { return false, &ProbeError{Short: short, Err: err} }
	feats, err := topology.ReadSchedFeatures(r)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fail("no scheduler features file (mount debugfs)",
			fmt.Errorf("%w: %s is absent: mount debugfs (mount -t debugfs debugfs /sys/kernel/debug), or the kernel lacks CONFIG_SCHED_DEBUG", ErrUnavailable, path))
	case errors.Is(err, fs.ErrPermission):
		return fail("scheduler features not readable (run as root)",
			fmt.Errorf("%w: %s is not readable by this user: run as root", ErrUnavailable, path))
	case errors.Is(err, topology.ErrBadFeatures):
		return fail("scheduler features file malformed", fmt.Errorf("refusing to change %s: %w", path, err))
	case err != nil:
		return fail("scheduler features unreadable", fmt.Errorf("%w: %w", ErrUnavailable, err))
	}
	on, ok := feats[Feature]
	if !ok {
		return fail("the kernel has no SIS_UTIL (Linux < 6.0)",
			fmt.Errorf("%w: the kernel has no %s (Linux < 6.0): its idle-CPU scan is not cut short by utilisation", ErrUnavailable, Feature))
	}
	if !topology.SchedFeaturesWritable(r) {
		return fail("scheduler features not writable (run as root)",
			fmt.Errorf("%w: %s is not writable by this user: run as root (in a container: the host's debugfs mounted read-write)", ErrUnavailable, path))
	}
	return on, nil
}

// Record is the state file's record of the switch: the value of Feature
// found before the first write, the boot it was found on
// (/proc/sys/kernel/random/boot_id; "" unknown), and who holds it.
type Record struct {
	Feature string   `json:"feature"`
	Prior   bool     `json:"prior"`
	BootID  string   `json:"boot_id"`
	Holders []Holder `json:"holders"`
}

// Holder is one user of the switch: what it is ("agent", "run", "nri")
// and its process (measure.Identity's PID-START form).
type Holder struct {
	Name  string `json:"name"`
	Owner string `json:"owner"`
}

// ParseRecord decodes a record strictly: unknown keys, trailing data, a
// feature other than Feature, more than MaxHolders holders, an empty or
// over-long name or an owner that is no process identity are errors.
func ParseRecord(b []byte) (Record, error) {
	if len(b) > store.MaxSettingValue {
		return Record{}, fmt.Errorf("parsing the wake_scan record: larger than %d bytes", store.MaxSettingValue)
	}
	var rec Record
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec); err != nil {
		return Record{}, fmt.Errorf("parsing the wake_scan record: %w", err)
	}
	if dec.More() {
		return Record{}, errors.New("parsing the wake_scan record: data after the object")
	}
	if rec.Feature != Feature {
		return Record{}, fmt.Errorf("parsing the wake_scan record: feature %.64q, want %s", rec.Feature, Feature)
	}
	if len(rec.BootID) > 64 {
		return Record{}, errors.New("parsing the wake_scan record: boot_id longer than 64 bytes")
	}
	if len(rec.Holders) > MaxHolders {
		return Record{}, fmt.Errorf("parsing the wake_scan record: %d holders, at most %d", len(rec.Holders), MaxHolders)
	}
	for _, h := range rec.Holders {
		if h.Name == "" || len(h.Name) > 64 {
			return Record{}, fmt.Errorf("parsing the wake_scan record: holder name %.64q: want 1 to 64 bytes", h.Name)
		}
		if _, err := measure.ParseIdentity(h.Owner); err != nil {
			return Record{}, fmt.Errorf("parsing the wake_scan record: holder %s: %w", h.Name, err)
		}
	}
	return rec, nil
}

// Options configure New.
type Options struct {
	// Root is the machine whose features file is switched: "" or "/" for
	// this one; tests give a directory holding
	// sys/kernel/debug/sched/features.
	Root string
	// Proc is the procfs of the holders' processes and of the boot id
	// (default /proc).
	Proc string
	// Name says what holds ("agent", "run", "nri").
	Name string
	// Owner is the holding process; zero: this one.
	Owner measure.Identity
}

// Scan is one holder's handle on the switch, over a state file.
type Scan struct {
	db   *store.DB
	root string
	proc string
	self Holder
	boot string
}

// New returns the handle of holder o.Name on db. It changes nothing.
func New(db *store.DB, o Options) (*Scan, error) {
	if o.Root == "" {
		o.Root = "/"
	}
	if o.Proc == "" {
		o.Proc = "/proc"
	}
	if o.Name == "" || len(o.Name) > 64 {
		return nil, fmt.Errorf("wake_scan holder name %.64q: want 1 to 64 bytes", o.Name)
	}
	if o.Owner == (measure.Identity{}) {
		id, err := measure.IdentityOf(o.Proc, os.Getpid())
		if err != nil {
			return nil, fmt.Errorf("reading own identity: %w", err)
		}
		o.Owner = id
	}
	s := &Scan{db: db, root: o.Root, proc: o.Proc, self: Holder{Name: o.Name, Owner: o.Owner.String()}}
	if b, err := os.ReadFile(filepath.Join(o.Proc, "sys/kernel/random/boot_id")); err == nil && len(b) <= 64 {
		s.boot = strings.TrimSpace(string(b))
	}
	return s, nil
}

// Action is what a Hold or Release did to the features file.
type Action string

// Actions of Hold and Release.
const (
	None     Action = ""
	Off      Action = "wrote NO_" + Feature
	Restored Action = "restored the value found"
)

// Hold makes this holder a user of the switch: SIS_UTIL is off when it
// returns nil (its value recorded first). Hold of a holder that holds is
// a no-op but for the write, which it repeats if someone turned the
// feature back on.
func (s *Scan) Hold() (Action, error) { return s.set(true) }

// Release drops this holder and the holders whose processes are gone; if
// none is left, it writes back the recorded value. An error keeps the
// record (and this holder), for a later Release or Recover.
func (s *Scan) Release() (Action, error) { return s.set(false) }

// Recover is Release for a process that never held: after a crash, it
// undoes what dead holders left, if no live holder is left.
func (s *Scan) Recover() (Action, error) { return s.set(false) }

func (s *Scan) set(hold bool) (Action, error) {
	if !hold {
		if _, err := s.db.LoadSetting(SettingKey); errors.Is(err, store.ErrNotFound) {
			return None, nil // nothing recorded: no write transaction
		}
	}
	var act Action
	err := s.db.UpdateSetting(SettingKey, func(old json.RawMessage) (json.RawMessage, error) {
		rec, err := s.current(old)
		if err != nil {
			return nil, err
		}
		if hold {
			if rec == nil {
				prior, err := s.read()
				if err != nil {
					return nil, err
				}
				rec = &Record{Feature: Feature, Prior: prior, BootID: s.boot, Holders: []Holder{}}
			}
			if len(rec.Holders) >= MaxHolders {
				return nil, fmt.Errorf("holding wake_scan: %d holders already, at most %d", len(rec.Holders), MaxHolders)
			}
			rec.Holders = append(rec.Holders, s.self)
			return json.Marshal(rec)
		}
		if rec == nil {
			return nil, nil
		}
		if len(rec.Holders) > 0 {
			return json.Marshal(rec)
		}
		on, err := s.read()
		if err != nil {
			return nil, fmt.Errorf("restoring %s: %w", Feature, err)
		}
		if on != rec.Prior {
			if err := s.write(rec.Prior); err != nil {
				return nil, fmt.Errorf("restoring %s: %w", Feature, err)
			}
			act = Restored
		}
		return nil, nil
	})
	if err != nil || !hold {
		return act, err
	}
	// The record is committed: now the write, under the same lock.
	err = s.db.UpdateSetting(SettingKey, func(old json.RawMessage) (json.RawMessage, error) {
		if old == nil {
			return nil, nil
		}
		rec, err := ParseRecord(old)
		if err != nil || !slices.Contains(rec.Holders, s.self) {
			return old, err
		}
		on, err := s.read()
		if err != nil {
			return nil, err
		}
		if on {
			if err := s.write(false); err != nil {
				return nil, err
			}
			act = Off
		}
		return old, nil
	})
	return act, err
}

// current decodes the stored record, without this holder and those whose
// processes are gone; nil where none is stored or it is of another boot.
func (s *Scan) current(old json.RawMessage) (*Record, error) {
	if old == nil {
		return nil, nil
	}
	rec, err := ParseRecord(old)
	if err != nil {
		return nil, fmt.Errorf("%w (delete the setting %q from the state file once the features are as they should be)", err, SettingKey)
	}
	if rec.BootID != "" && s.boot != "" && rec.BootID != s.boot {
		return nil, nil // the kernel started again with its defaults
	}
	live := []Holder{}
	for _, h := range rec.Holders {
		id, _ := measure.ParseIdentity(h.Owner)
		if h != s.self && id.Alive(s.proc) {
			live = append(live, h)
		}
	}
	rec.Holders = live
	return &rec, nil
}

// read returns the feature's state (Probe's checks, the file writable).
func (s *Scan) read() (bool, error) {
	r, err := openRoot(s.root)
	if err != nil {
		return false, err
	}
	defer r.Close()
	return probe(r, s.root)
}

// write switches the feature on or off (echo [NO_]SIS_UTIL > features)
// and reads the file again to check the kernel took it.
func (s *Scan) write(on bool) error {
	r, err := openRoot(s.root)
	if err != nil {
		return err
	}
	defer r.Close()
	tok := Feature
	if !on {
		tok = "NO_" + Feature
	}
	f, err := r.OpenFile(topology.SchedFeaturesFile, os.O_WRONLY|os.O_TRUNC|syscall.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("writing %s: %w", tok, err)
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return fmt.Errorf("writing %s: %s is not a regular file", tok, topology.SchedFeaturesFile)
	}
	_, werr := f.WriteString(tok)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("writing %s: %w", tok, werr)
	}
	feats, err := topology.ReadSchedFeatures(r)
	if err != nil {
		return fmt.Errorf("checking %s: %w", tok, err)
	}
	if got, ok := feats[Feature]; !ok || got != on {
		return fmt.Errorf("writing %s: the kernel's features still say %s is %v", tok, Feature, got)
	}
	return nil
}
