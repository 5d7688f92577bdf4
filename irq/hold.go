package irq

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/measure"
	"github.com/corepin/corepin/store"
)

// SettingKey is the state file's settings key of the record.
const SettingKey = "irq_isolate"

// Bounds of a record.
const (
	// MaxHolders bounds the holders one record keeps (the agent's
	// workloads and one per job of each concurrent run).
	MaxHolders = 256
	// MaxID bounds a holder's id (a workload name, a job's id).
	MaxID = 128
)

// Record is the state file's record: the boot it was made on
// (/proc/sys/kernel/random/boot_id; "" unknown), the affinity each
// interrupt corepin changed had before its first write, and the holders.
type Record struct {
	BootID  string   `json:"boot_id"`
	Prior   []Prior  `json:"prior"`
	Holders []Holder `json:"holders"`
}

// Prior is the affinity found on a set of interrupts (list format of
// their numbers), before corepin's first write to each, and the affinity
// corepin last wrote to them (Set; "" before a write): an interrupt found
// with neither, moved off the kept CPUs by another writer (irqbalance, an
// administrator), is left to it.
type Prior struct {
	IRQs     string `json:"irqs"`
	Affinity string `json:"affinity"`
	Set      string `json:"set,omitempty"`
}

// Holder is one user keeping CPUs clear: what it is ("agent", "run"),
// its process (measure.Identity's PID-START form), what it holds for (a
// workload's name, a job's id) and the CPUs.
type Holder struct {
	Name  string `json:"name"`
	Owner string `json:"owner"`
	ID    string `json:"id"`
	CPUs  string `json:"cpus"`
}

// state is a parsed record.
type state struct {
	boot    string
	prior   map[int]cpuset.CPUSet
	set     map[int]cpuset.CPUSet // what corepin last wrote, where it wrote
	holders []Holder
}

// ParseRecord decodes a record strictly: unknown keys, trailing data,
// more than MaxHolders holders, an interrupt recorded twice, an empty or
// malformed set, a holder without a name or id, or an owner that is no
// process identity are errors.
func ParseRecord(b []byte) (Record, error) {
	_, rec, err := parseRecord(b)
	return rec, err
}

func parseRecord(b []byte) (state, Record, error) {
	fail := func(format string, a ...any) (state, Record, error) {
		return state{}, Record{}, fmt.Errorf("parsing the irq_isolate record: "+format, a...)
	}
	if len(b) > store.MaxSettingValue {
		return fail("larger than %d bytes", store.MaxSettingValue)
	}
	var rec Record
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec); err != nil {
		return fail("%w", err)
	}
	if dec.More() {
		return fail("data after the object")
	}
	if len(rec.BootID) > 64 {
		return fail("boot_id longer than 64 bytes")
	}
	if len(rec.Holders) > MaxHolders {
		return fail("%d holders, at most %d", len(rec.Holders), MaxHolders)
	}
	st := state{boot: rec.BootID, prior: map[int]cpuset.CPUSet{}, set: map[int]cpuset.CPUSet{}, holders: rec.Holders}
	for _, p := range rec.Prior {
		irqs, err := cpuset.Parse(p.IRQs)
		if err != nil || irqs.IsEmpty() {
			return fail("prior irqs %.64q: want a non-empty list", p.IRQs)
		}
		aff, err := ParseAffinity([]byte(p.Affinity))
		if err != nil {
			return fail("prior affinity of irqs %s: %w", irqs, err)
		}
		var set cpuset.CPUSet
		if p.Set != "" {
			if set, err = ParseAffinity([]byte(p.Set)); err != nil {
				return fail("affinity set on irqs %s: %w", irqs, err)
			}
		}
		for n := range irqs.All() {
			if _, dup := st.prior[n]; dup {
				return fail("irq %d recorded twice", n)
			}
			st.prior[n] = aff
			if p.Set != "" {
				st.set[n] = set
			}
		}
	}
	for _, h := range rec.Holders {
		if h.Name == "" || len(h.Name) > 64 {
			return fail("holder name %.64q: want 1 to 64 bytes", h.Name)
		}
		if h.ID == "" || len(h.ID) > MaxID {
			return fail("holder %s id %.64q: want 1 to %d bytes", h.Name, h.ID, MaxID)
		}
		if _, err := measure.ParseIdentity(h.Owner); err != nil {
			return fail("holder %s: %w", h.Name, err)
		}
		if c, err := cpuset.Parse(h.CPUs); err != nil || c.IsEmpty() {
			return fail("holder %s %s cpus %.64q: want a non-empty list", h.Name, h.ID, h.CPUs)
		}
	}
	return st, rec, nil
}

// record encodes st, its prior affinities grouped by value (and by the
// affinity set).
func (st state) record() Record {
	type key struct{ prior, set string }
	by := map[key]*cpuset.Builder{}
	for n, aff := range st.prior {
		k := key{prior: aff.String()}
		if set, ok := st.set[n]; ok {
			k.set = set.String()
		}
		if by[k] == nil {
			by[k] = &cpuset.Builder{}
		}
		by[k].Add(n)
	}
	rec := Record{BootID: st.boot, Prior: []Prior{}, Holders: st.holders}
	for k, b := range by {
		rec.Prior = append(rec.Prior, Prior{IRQs: b.Result().String(), Affinity: k.prior, Set: k.set})
	}
	slices.SortFunc(rec.Prior, func(a, b Prior) int { return strings.Compare(a.IRQs, b.IRQs) })
	return rec
}

// kept is the union of the holders' CPUs.
func (st state) kept() cpuset.CPUSet {
	var b cpuset.Builder
	for _, h := range st.holders {
		c, _ := cpuset.Parse(h.CPUs) // parseRecord checked it
		b.AddSet(c)
	}
	return b.Result()
}

// Options configure New.
type Options struct {
	// Root is the machine whose interrupts are steered: "" or "/" for
	// this one; tests give a directory holding proc/irq.
	Root string
	// Proc is the procfs of the holders' processes and of the boot id
	// (default /proc).
	Proc string
	// Name says what holds ("agent", "run").
	Name string
	// Owner is the holding process; zero: this one.
	Owner measure.Identity
	// BannedFile, when set, is the file of irqbalance's banned CPUs
	// corepin keeps (WriteBanned) after each change; "" keeps none.
	BannedFile string
}

// Steer is one holder's handle on the machine's interrupts, over a state
// file.
type Steer struct {
	db     *store.DB
	root   string
	proc   string
	name   string
	owner  string
	boot   string
	banned string
	// write writes one affinity (writeAffinity; tests make it refuse).
	write func(r *os.Root, n int, set cpuset.CPUSet) error
}

// New returns the handle of holder o.Name on db. It changes nothing.
func New(db *store.DB, o Options) (*Steer, error) {
	if o.Root == "" {
		o.Root = "/"
	}
	if o.Proc == "" {
		o.Proc = "/proc"
	}
	if o.Name == "" || len(o.Name) > 64 {
		return nil, fmt.Errorf("irq_isolate holder name %.64q: want 1 to 64 bytes", o.Name)
	}
	if o.Owner == (measure.Identity{}) {
		id, err := measure.IdentityOf(o.Proc, os.Getpid())
		if err != nil {
			return nil, fmt.Errorf("reading own identity: %w", err)
		}
		o.Owner = id
	}
	s := &Steer{db: db, root: o.Root, proc: o.Proc, name: o.Name, owner: o.Owner.String(), banned: o.BannedFile, write: writeAffinity}
	if b, err := os.ReadFile(filepath.Join(o.Proc, "sys/kernel/random/boot_id")); err == nil && len(b) <= 64 {
		s.boot = strings.TrimSpace(string(b))
	}
	return s, nil
}

// Report is what a change did.
type Report struct {
	// Kept is the CPUs all live holders keep clear now.
	Kept cpuset.CPUSet `json:"kept"`
	// Moved are the interrupts written off Kept.
	Moved []int `json:"moved,omitempty"`
	// Restored are the interrupts given back the affinity found.
	Restored []int `json:"restored,omitempty"`
	// Refused are the interrupts whose write the kernel refused (per-CPU
	// or managed ones): left as they are.
	Refused []Refusal `json:"refused,omitempty"`
	// Stuck are the interrupts whose affinity is only CPUs kept clear:
	// left as they are, since an empty affinity is no affinity.
	Stuck []int `json:"stuck,omitempty"`
	// Yielded are the interrupts another writer (irqbalance, an
	// administrator) moved off the kept CPUs since corepin's write: left
	// to it and forgotten, so that a release gives back nothing corepin
	// did not take.
	Yielded []int `json:"yielded,omitempty"`
}

// Refusal is an interrupt the kernel would not move, and its error.
type Refusal struct {
	IRQ int    `json:"irq"`
	Err string `json:"error"`
}

// Hold keeps cpus clear of movable interrupts for id (replacing what id
// held before). The prior affinities are recorded before any write.
func (s *Steer) Hold(id string, cpus cpuset.CPUSet) (Report, error) {
	if id == "" || len(id) > MaxID {
		return Report{}, fmt.Errorf("holding interrupts off cpus: id %.64q: want 1 to %d bytes", id, MaxID)
	}
	if cpus.IsEmpty() {
		return Report{}, fmt.Errorf("holding interrupts off cpus for %s: no cpus", id)
	}
	return s.change(func(mine []Holder) []Holder {
		mine = slices.DeleteFunc(mine, func(h Holder) bool { return h.ID == id })
		return append(mine, Holder{Name: s.name, Owner: s.owner, ID: id, CPUs: cpus.String()})
	})
}

// Release drops what id holds, and the holders whose processes are gone;
// interrupts get back the affinity found, less what others still keep
// clear. An error keeps the record for a later Release or Recover.
func (s *Steer) Release(id string) (Report, error) {
	return s.change(func(mine []Holder) []Holder {
		return slices.DeleteFunc(mine, func(h Holder) bool { return h.ID == id })
	})
}

// Sync makes held (id -> cpus) all this holder keeps clear: what it held
// for other ids is released (an agent at start, after a crash, with the
// workloads it still runs).
func (s *Steer) Sync(held map[string]cpuset.CPUSet) (Report, error) {
	for id, c := range held {
		if id == "" || len(id) > MaxID || c.IsEmpty() {
			return Report{}, fmt.Errorf("syncing interrupts: id %.64q with cpus %q: want an id of 1 to %d bytes and cpus", id, c, MaxID)
		}
	}
	return s.change(func([]Holder) []Holder {
		var mine []Holder
		for _, id := range slices.Sorted(maps.Keys(held)) {
			mine = append(mine, Holder{Name: s.name, Owner: s.owner, ID: id, CPUs: held[id].String()})
		}
		return mine
	})
}

// Recover undoes what holders whose processes are gone left, keeping
// this holder's and live ones'.
func (s *Steer) Recover() (Report, error) {
	return s.change(func(mine []Holder) []Holder { return mine })
}

// change edits this holder's entries (edit gets them and returns the new
// ones), drops dead holders, records the prior affinity of every
// interrupt about to change and commits; then, in a second transaction,
// writes the affinities and forgets the interrupts left as found.
func (s *Steer) change(edit func(mine []Holder) []Holder) (Report, error) {
	if _, err := s.db.LoadSetting(SettingKey); errors.Is(err, store.ErrNotFound) {
		if len(edit(nil)) == 0 {
			return Report{}, nil // nothing recorded and nothing to hold: no transaction
		}
	}
	err := s.db.UpdateSetting(SettingKey, func(old json.RawMessage) (json.RawMessage, error) {
		st, err := s.current(old)
		if err != nil {
			return nil, err
		}
		var mine, others []Holder
		for _, h := range st.holders {
			if h.Name == s.name && h.Owner == s.owner {
				mine = append(mine, h)
			} else {
				others = append(others, h)
			}
		}
		st.holders = append(others, edit(mine)...)
		if len(st.holders) > MaxHolders {
			return nil, fmt.Errorf("holding interrupts off cpus: %d holders, at most %d", len(st.holders), MaxHolders)
		}
		if len(st.holders) == 0 && len(st.prior) == 0 {
			return nil, nil
		}
		irqs, err := s.list()
		if err != nil {
			return nil, err
		}
		kept := st.kept()
		for _, q := range irqs {
			if _, ok := st.prior[q.N]; ok || q.N > cpuset.MaxCPU {
				continue
			}
			if p := plan(q, q.Affinity, kept); !p.target.Equals(q.Affinity) {
				st.prior[q.N] = q.Affinity
			}
		}
		return s.encode(st)
	})
	if err != nil {
		return Report{}, err
	}
	var rep Report
	err = s.db.UpdateSetting(SettingKey, func(old json.RawMessage) (json.RawMessage, error) {
		rep = Report{}
		if old == nil { // nothing held, nothing to give back
			return nil, s.writeBanned(cpuset.CPUSet{})
		}
		st, err := s.current(old)
		if err != nil {
			return nil, err
		}
		irqs, err := s.list()
		if err != nil {
			return nil, err
		}
		r, err := openRoot(s.root)
		if err != nil {
			return nil, err
		}
		defer r.Close()
		kept := st.kept()
		rep.Kept = kept
		seen := map[int]bool{}
		for _, q := range irqs {
			seen[q.N] = true
			base, recorded := st.prior[q.N]
			if !recorded {
				if q.N > cpuset.MaxCPU || !q.Affinity.Intersects(kept) {
					continue
				}
				base = q.Affinity // a new interrupt, after the first transaction
			}
			if set, ok := st.set[q.N]; ok && !q.Affinity.Equals(set) && !q.Affinity.Intersects(kept) {
				// Another writer moved it since corepin's write, off the
				// kept CPUs: its choice stands, and is not undone at release.
				rep.Yielded = append(rep.Yielded, q.N)
				delete(st.prior, q.N)
				delete(st.set, q.N)
				continue
			}
			p := plan(q, base, kept)
			if p.stuck {
				rep.Stuck = append(rep.Stuck, q.N)
			}
			final := q.Affinity
			if !p.target.Equals(q.Affinity) {
				if !recorded {
					continue // its prior is not recorded: the next change moves it
				}
				switch err := s.write(r, q.N, p.target); {
				case err == nil:
					final = p.target
					st.set[q.N] = p.target
					if p.target.Equals(base) {
						rep.Restored = append(rep.Restored, q.N)
					} else {
						rep.Moved = append(rep.Moved, q.N)
					}
				case refused(err):
					rep.Refused = append(rep.Refused, Refusal{IRQ: q.N, Err: err.Error()})
				default:
					return nil, fmt.Errorf("writing irq %d affinity %s: %w", q.N, p.target, err)
				}
			}
			switch {
			case recorded && final.Equals(base):
				delete(st.prior, q.N)
				delete(st.set, q.N)
			case recorded && final.Equals(p.target):
				st.set[q.N] = final // as corepin would write it (a write before a crash, unrecorded)
			}
		}
		for n := range st.prior {
			if !seen[n] {
				delete(st.prior, n) // the device is gone
				delete(st.set, n)
			}
		}
		if err := s.writeBanned(kept); err != nil {
			return nil, err
		}
		if len(st.holders) == 0 && len(st.prior) == 0 {
			return nil, nil
		}
		return s.encode(st)
	})
	return rep, err
}

// plan is what one interrupt should be.
type planned struct {
	target cpuset.CPUSet
	stuck  bool
}

// plan is interrupt q's target affinity: its affinity found (base) less
// the CPUs kept clear; where that leaves nothing, its current affinity.
func plan(q IRQ, base, kept cpuset.CPUSet) planned {
	if !base.Intersects(kept) {
		return planned{target: base}
	}
	t := base.Difference(kept)
	if t.IsEmpty() {
		return planned{target: q.Affinity, stuck: true}
	}
	return planned{target: t}
}

// current decodes the stored record without the holders whose processes
// are gone; an empty state where none is stored or it is of another boot.
func (s *Steer) current(old json.RawMessage) (state, error) {
	empty := state{boot: s.boot, prior: map[int]cpuset.CPUSet{}, set: map[int]cpuset.CPUSet{}}
	if old == nil {
		return empty, nil
	}
	st, _, err := parseRecord(old)
	if err != nil {
		return state{}, fmt.Errorf("%w (delete the setting %q from the state file once the interrupts' affinities are as they should be)", err, SettingKey)
	}
	if st.boot != "" && s.boot != "" && st.boot != s.boot {
		return empty, nil // the kernel started again with its defaults
	}
	live := []Holder{}
	for _, h := range st.holders {
		id, _ := measure.ParseIdentity(h.Owner)
		if (h.Name == s.name && h.Owner == s.owner) || id.Alive(s.proc) {
			live = append(live, h)
		}
	}
	st.holders = live
	return st, nil
}

func (s *Steer) encode(st state) (json.RawMessage, error) {
	b, err := json.Marshal(st.record())
	if err == nil && len(b) > store.MaxSettingValue {
		err = fmt.Errorf("recording interrupt affinities: %d bytes, at most %d", len(b), store.MaxSettingValue)
	}
	return b, err
}

func (s *Steer) list() ([]IRQ, error) {
	irqs, err := List(s.root)
	if err != nil {
		return nil, fmt.Errorf("steering interrupts: %w", err)
	}
	return irqs, nil
}

func (s *Steer) writeBanned(kept cpuset.CPUSet) error {
	if s.banned == "" {
		return nil
	}
	if err := WriteBanned(s.banned, kept); err != nil {
		return fmt.Errorf("writing irqbalance's banned cpus: %w", err)
	}
	return nil
}
