package nodecore

import (
	"fmt"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/store"
	"github.com/corepin/corepin/topology"
)

// Read returns what the state file at path holds, by name, as a Node
// would hold it on machine t (the shared pools placed under the settings
// the file records), without taking the file's lock or writing to it: what
// `corepin ctl` shows on a node where no agent runs, such as the NRI
// plugin's containers on a Kubernetes node, or a run's jobs. Groups and
// offline CPUs are not looked at.
func Read(path string, t *topology.Topology) ([]Held, error) {
	db, err := store.OpenReadOnly(path)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	as, err := db.Assignments()
	if err != nil {
		return nil, fmt.Errorf("reading the assignments of %s: %w", path, err)
	}
	var cfg alloc.NodeSettings
	if sc, ok, err := RecordedConfig(db); err != nil {
		return nil, err
	} else if ok {
		if cfg, err = sc.On(t, alloc.NodeSettings{}); err != nil {
			return nil, err
		}
	}
	st, recs, err := LoadState(t, cfg, as)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	pools := st.Pools()
	out := make([]Held, 0, len(as))
	for _, a := range as {
		_, aa, err := DecodeAssignment(a)
		if err != nil {
			return nil, err
		}
		h := Held{Assignment: a, Record: recs[a.Name], CPUs: aa.CPUs}
		switch {
		case a.Cpuset != "":
		case a.QoS == string(alloc.BE):
			h.CPUs = pools.BE
		default:
			h.CPUs = pools.LS
		}
		out = append(out, h)
	}
	return out, nil
}
