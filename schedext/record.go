package schedext

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/corepin/corepin/measure"
	"github.com/corepin/corepin/store"
)

// SettingKey is the state file's settings key of the supervisor's record.
const SettingKey = "sched_ext"

// Record is what the supervisor keeps in the state file of the
// scx_layered it started, so that the next agent adopts it instead of
// starting a second one: its pid and start time (field 22 of
// /proc/PID/stat: together they name one process across pid reuse), its
// comm, and Spec, a digest of the binary, arguments and layer config it
// was started with.
type Record struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
	Comm  string `json:"comm"`
	Spec  string `json:"spec"`
}

// Identity is the record's process identity.
func (r Record) Identity() measure.Identity { return measure.Identity{PID: r.PID, Start: r.Start} }

// ParseRecord decodes a record strictly: unknown keys, trailing data, a
// pid that is not positive, an empty comm or one longer than the
// kernel's 15 bytes, or a spec that is not 64 hex digits are errors.
func ParseRecord(b []byte) (Record, error) {
	if len(b) > 4096 {
		return Record{}, errors.New("parsing the sched_ext record: larger than 4096 bytes")
	}
	var r Record
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Record{}, fmt.Errorf("parsing the sched_ext record: %w", err)
	}
	if dec.More() {
		return Record{}, errors.New("parsing the sched_ext record: data after the object")
	}
	if r.PID <= 0 || r.PID > 1<<22 {
		return Record{}, fmt.Errorf("parsing the sched_ext record: pid %d: want 1 to %d", r.PID, 1<<22)
	}
	if r.Comm == "" || len(r.Comm) > 15 {
		return Record{}, fmt.Errorf("parsing the sched_ext record: comm %.32q: want 1 to 15 bytes", r.Comm)
	}
	if len(r.Spec) != 64 || bytes.IndexFunc([]byte(r.Spec), func(c rune) bool { return (c < '0' || c > '9') && (c < 'a' || c > 'f') }) >= 0 {
		return Record{}, fmt.Errorf("parsing the sched_ext record: spec %.80q: want 64 lower-case hex digits", r.Spec)
	}
	return r, nil
}

// Records keeps the supervisor's record durably.
type Records interface {
	// Load returns the record, nil when there is none.
	Load() (*Record, error)
	// Save stores r, replacing the record.
	Save(r Record) error
	// Clear deletes the record if it is r (a later one stays).
	Clear(r Record) error
}

// StateRecords keeps the record in the settings of a state file (key
// SettingKey), as wakescan keeps its holders.
func StateRecords(db *store.DB) Records { return stateRecords{db} }

type stateRecords struct{ db *store.DB }

var _ Records = stateRecords{}

func (s stateRecords) Load() (*Record, error) {
	st, err := s.db.LoadSetting(SettingKey)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	r, err := ParseRecord(st.Value)
	if err != nil {
		return nil, err
	}
	return &r, nil
}

func (s stateRecords) Save(r Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("saving the sched_ext record: %w", err)
	}
	return s.db.SaveSetting(SettingKey, b)
}

func (s stateRecords) Clear(r Record) error {
	return s.db.UpdateSetting(SettingKey, func(old json.RawMessage) (json.RawMessage, error) {
		if old == nil {
			return nil, nil
		}
		if cur, err := ParseRecord(old); err == nil && cur != r {
			return old, nil
		}
		return nil, nil // ours, or unreadable: gone either way
	})
}
