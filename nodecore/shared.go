package nodecore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/store"
	"github.com/corepin/corepin/topology"
)

// SettingAlloc is the state file's settings key of the recorded
// allocator configuration.
const SettingAlloc = "alloc_config"

// maxRecordedOptions bounds the policy options of a recorded
// configuration (the kubelet knows six).
const maxRecordedOptions = 32

// SharedConfig is the allocator configuration a daemon sharing a state
// file (the agent, the NRI plugin) records in it when it opens it, so
// that every process placing on that file (a local `corepin run`'s
// StatePlacer) places with the same reserved CPUs, policy and options.
// The newest writer's record wins; nothing already assigned moves when it
// changes: a daemon that opens with a new configuration re-validates the
// assignments it finds through its usual load (Reconcile, Refresh), and
// a later placement sees the new record.
type SharedConfig struct {
	ReservedCPUs   string   `json:"reserved_cpus"`
	Policy         string   `json:"policy,omitempty"`
	PolicyOptions  []string `json:"policy_options,omitempty"`
	TopologyPolicy string   `json:"topology_policy,omitempty"`
	// Writer says who recorded it ("agent", "nri") and PID its process.
	Writer string `json:"writer"`
	PID    int    `json:"pid"`
	// RecordedAt is when it was written (the store's time, not the JSON's).
	RecordedAt time.Time `json:"-"`
}

// SharedConfigOf is what writer records for settings s, its wire form in
// the state file. (s.ReservedCount is not recorded: no front door sets it,
// and the CPUs it picks depend on each process's own view of the machine;
// nor are Bind and NUMA, which no daemon sharing a state file sets.)
func SharedConfigOf(writer string, s alloc.NodeSettings) SharedConfig {
	return SharedConfig{ReservedCPUs: s.Reserved.String(), Policy: string(s.Policy),
		PolicyOptions: s.Options, TopologyPolicy: string(s.TopologyPolicy), Writer: writer, PID: os.Getpid()}
}

// Settings are the node settings c records, without a machine's view.
// Errors wrap ErrInvalid.
func (c SharedConfig) Settings() (alloc.NodeSettings, error) {
	s, err := ParseSettings(c.ReservedCPUs, c.Policy, c.PolicyOptions, c.TopologyPolicy)
	if err != nil {
		return alloc.NodeSettings{}, fmt.Errorf("recorded configuration: %w", err)
	}
	return s, nil
}

// ParseSettings reads a node's settings as its wire forms spell them (the
// agent's YAML and the shared state use the same keys: reserved_cpus,
// policy, policy_options, topology_policy). Options are checked where a
// machine is known (alloc.NewState). Errors wrap ErrInvalid and name the
// key.
func ParseSettings(reservedCPUs, policy string, options []string, topologyPolicy string) (alloc.NodeSettings, error) {
	s := alloc.NodeSettings{Policy: alloc.Policy(policy), Options: options, TopologyPolicy: alloc.TopologyPolicy(topologyPolicy)}
	if reservedCPUs != "" {
		set, err := cpuset.Parse(reservedCPUs)
		if err != nil {
			return s, fmt.Errorf("%w: reserved_cpus: %v", ErrInvalid, err)
		}
		s.Reserved = set
	}
	switch s.Policy {
	case "", alloc.PolicyCorepin, alloc.PolicyKubelet:
	default:
		return s, fmt.Errorf("%w: policy %q: want corepin or kubelet", ErrInvalid, policy)
	}
	switch s.TopologyPolicy {
	case "", alloc.TopologyNone, alloc.TopologyBestEffort, alloc.TopologyRestricted, alloc.TopologySingleNUMANode:
	default:
		return s, fmt.Errorf("%w: topology_policy %q: want none, best-effort, restricted or single-numa-node", ErrInvalid, topologyPolicy)
	}
	return s, nil
}

// RecordConfig writes what writer places with into db.
func RecordConfig(db *store.DB, writer string, s alloc.NodeSettings) error {
	doc, err := json.Marshal(SharedConfigOf(writer, s))
	if err != nil {
		return err
	}
	if err := db.SaveSetting(SettingAlloc, doc); err != nil {
		return fmt.Errorf("recording the allocator configuration: %w", err)
	}
	return nil
}

// RecordedConfig reads the allocator configuration recorded in db; ok is
// false when no daemon recorded one (a file only runs have used, or one
// written by a corepin before schema 3).
func RecordedConfig(db *store.DB) (c SharedConfig, ok bool, err error) {
	s, err := db.LoadSetting(SettingAlloc)
	if errors.Is(err, store.ErrNotFound) {
		return SharedConfig{}, false, nil
	}
	if err != nil {
		return SharedConfig{}, false, err
	}
	if c, err = ParseSharedConfig(s.Value); err != nil {
		return SharedConfig{}, false, fmt.Errorf("reading the allocator configuration recorded in %s: %w", db.Path(), err)
	}
	c.RecordedAt = s.UpdatedAt
	return c, true, nil
}

// ParseSharedConfig decodes a recorded configuration strictly (unknown
// keys, trailing data and out-of-range values are errors, wrapping
// ErrInvalid). It does not check it against a machine: see Config.
func ParseSharedConfig(b []byte) (SharedConfig, error) {
	if len(b) > store.MaxSettingValue {
		return SharedConfig{}, fmt.Errorf("%w: recorded configuration larger than %d bytes", ErrInvalid, store.MaxSettingValue)
	}
	var c SharedConfig
	if err := decodeStrict(b, &c); err != nil {
		return SharedConfig{}, fmt.Errorf("%w: recorded configuration: %v", ErrInvalid, err)
	}
	if len(c.PolicyOptions) == 0 {
		c.PolicyOptions = nil
	}
	if len(c.PolicyOptions) > maxRecordedOptions {
		return SharedConfig{}, fmt.Errorf("%w: recorded configuration has %d policy options, at most %d", ErrInvalid, len(c.PolicyOptions), maxRecordedOptions)
	}
	if _, err := c.Settings(); err != nil {
		return SharedConfig{}, err
	}
	return c, nil
}

// On is the node settings a process with topology t and its own
// settings own places with on a file where c is recorded: c's settings,
// and as reserved c's reserved CPUs (those online on t) together with
// own.Reserved (for a run, the CPUs outside its cpuset cgroup). Errors
// wrap ErrInvalid.
func (c SharedConfig) On(t *topology.Topology, own alloc.NodeSettings) (alloc.NodeSettings, error) {
	ac, err := c.Settings()
	if err != nil {
		return alloc.NodeSettings{}, err
	}
	ac.Reserved = ac.Reserved.Intersection(t.Online()).Union(own.Reserved)
	if _, err := alloc.NewState(t, ac); err != nil {
		return alloc.NodeSettings{}, fmt.Errorf("%w: the allocator configuration the %s (pid %d) recorded in the state file cannot be used here: %v",
			ErrInvalid, c.Writer, c.PID, err)
	}
	return ac, nil
}

// decodeStrict decodes one JSON object from b into v: unknown keys (a
// newer corepin's setting this one cannot honour) and data after the
// object are errors.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("data after the object")
	}
	return nil
}
