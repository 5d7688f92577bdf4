package bench

import (
	"time"

	"github.com/corepin/corepin/experiment"
	"github.com/corepin/corepin/topology"
)

// Report is everything `corepin bench` measured and concluded in one run;
// the terminal summary and report/index.html are both rendered from it,
// and `corepin report` rebuilds it from the results database.
type Report struct {
	RunID          int64     `json:"run_id"`
	GeneratedAt    time.Time `json:"generated_at"`
	CorepinVersion string    `json:"corepin_version"`
	Kernel         string    `json:"kernel"`
	Hostname       string    `json:"hostname"`
	Quick          bool      `json:"quick"`
	Driver         string    `json:"driver"`
	// Topology is the machine's `corepin topo -o json` document;
	// TopologySummary its one-line summary and TopologyText its text map.
	Topology        topology.Doc `json:"topology"`
	TopologySummary string       `json:"topology_summary"`
	TopologyText    string       `json:"topology_text"`
	Commands        []string     `json:"commands"` // to reproduce
	// Params are the run's full, resolved parameters, as stored with it.
	Params      experiment.Params  `json:"params"`
	Experiments []ExperimentReport `json:"experiments"`
}
