package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/store"
	"github.com/corepin/corepin/topology"
)

// settingAlloc is the state file's settings key of the recorded
// allocator configuration.
const settingAlloc = "alloc_config"

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

// sharedConfigOf is what a writer records for cfg and topologyPolicy.
// (cfg.ReservedCount is not recorded: no front door sets it, and the
// CPUs it picks depend on each process's own view of the machine.)
func sharedConfigOf(writer string, cfg alloc.NodeSettings, topologyPolicy string) SharedConfig {
	return SharedConfig{ReservedCPUs: cfg.Reserved.String(), Policy: string(cfg.Policy),
		PolicyOptions: cfg.Options, TopologyPolicy: topologyPolicy, Writer: writer, PID: os.Getpid()}
}

// recordConfig writes what writer places with into db.
func recordConfig(db *store.DB, writer string, cfg alloc.NodeSettings, topologyPolicy string) error {
	doc, err := json.Marshal(sharedConfigOf(writer, cfg, topologyPolicy))
	if err != nil {
		return err
	}
	if err := db.SaveSetting(settingAlloc, doc); err != nil {
		return fmt.Errorf("recording the allocator configuration: %w", err)
	}
	return nil
}

// RecordedConfig reads the allocator configuration recorded in db; ok is
// false when no daemon recorded one (a file only runs have used, or one
// written by a corepin before schema 3).
func RecordedConfig(db *store.DB) (c SharedConfig, ok bool, err error) {
	s, err := db.LoadSetting(settingAlloc)
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
	if _, err := c.config(); err != nil {
		return SharedConfig{}, err
	}
	switch alloc.TopologyPolicy(c.TopologyPolicy) {
	case "", alloc.TopologyNone, alloc.TopologyBestEffort, alloc.TopologyRestricted, alloc.TopologySingleNUMANode:
	default:
		return SharedConfig{}, fmt.Errorf("%w: recorded topology_policy %q: want none, best-effort, restricted or single-numa-node", ErrInvalid, c.TopologyPolicy)
	}
	return c, nil
}

// config is c's allocator configuration, without a machine's view.
func (c SharedConfig) config() (alloc.NodeSettings, error) {
	ac, err := Config{ReservedCPUs: c.ReservedCPUs, Policy: c.Policy, PolicyOptions: c.PolicyOptions}.AllocConfig()
	if err != nil {
		return alloc.NodeSettings{}, fmt.Errorf("recorded configuration: %w", err)
	}
	return ac, nil
}

// Config is the configuration a process with topology t and its own
// configuration own places with on a file where c is recorded: c's
// policy and options, and as reserved c's reserved CPUs (those online on
// t) together with own.Reserved (for a run, the CPUs outside its cpuset
// cgroup). Errors wrap ErrInvalid.
func (c SharedConfig) Config(t *topology.Topology, own alloc.NodeSettings) (alloc.NodeSettings, error) {
	ac, err := c.config()
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
