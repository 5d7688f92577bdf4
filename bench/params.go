package bench

import (
	"encoding/json"
	"fmt"
)

// Params is the full, resolved parameters of one bench run: its flags and,
// per experiment, the spec it ran with after defaults, the --spec file and
// what the machine settled (a workload "auto" resolved to transcode or
// spin). It is stored with the run as one JSON document (store.Run.Params),
// and Rebuild analyses from it, so a report regenerated from the database
// analyses exactly what was run.
type Params struct {
	Quick   bool   `json:"quick"`
	Repeats int    `json:"repeats"`
	Seed    uint64 `json:"seed,omitempty"`
	Driver  string `json:"driver"`
	// Argv is the bench command as run ("corepin", "bench", ...), word by
	// word; experimentCommand edits it, never a joined command line.
	Argv []string `json:"argv,omitempty"`
	// Commands are the commands that reproduce the run, joined for a shell
	// (the report prints them; older runs stored only these).
	Commands []string `json:"commands,omitempty"`
	// SpecFile is the --spec file's path, for the record: its content is
	// in Experiments.
	SpecFile string `json:"spec,omitempty"`
	// Experiments are the selected experiments in run order with their
	// resolved specs.
	Experiments []ExperimentParams `json:"experiments,omitempty"`
}

// ExperimentParams is one experiment's resolved spec.
type ExperimentParams struct {
	Name string `json:"name"`
	// Spec is the experiment's spec as JSON (absent for experiments
	// without parameters).
	Spec json.RawMessage `json:"spec,omitempty"`
}

// Resolver is the optional ability of a Configurable experiment to settle
// what its spec leaves to the machine (a workload "auto") before the run's
// Params are recorded. Resolve changes only the spec.
type Resolver interface {
	Resolve(env *Env)
}

// ResolveParams resolves every experiment of exps (Resolver) and records
// their specs into p.Experiments, in order. Call it after Configure.
func ResolveParams(p Params, exps []Experiment, env *Env) (Params, error) {
	p.Experiments = nil
	for _, e := range exps {
		ep := ExperimentParams{Name: e.Name()}
		if r, ok := e.(Resolver); ok {
			r.Resolve(env)
		}
		if c, ok := e.(Configurable); ok {
			b, err := json.Marshal(c.CurrentSpec())
			if err != nil {
				return p, fmt.Errorf("recording %s parameters: %w", e.Name(), err)
			}
			ep.Spec = b
		}
		p.Experiments = append(p.Experiments, ep)
	}
	return p, nil
}

// ParseParams decodes a run's stored parameters; empty input is the zero
// Params (a run recorded before parameters were).
func ParseParams(b []byte) (Params, error) {
	var p Params
	if len(b) == 0 {
		return p, nil
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("parsing bench parameters: %w", err)
	}
	return p, nil
}

// Apply configures e as p recorded it: the defaults for p.Quick, then the
// recorded spec over them. It reports whether p recorded e at all.
func (p Params) Apply(e Experiment) (bool, error) {
	c, ok := e.(Configurable)
	if ok {
		c.Spec(p.Quick)
	}
	for _, ep := range p.Experiments {
		if ep.Name != e.Name() {
			continue
		}
		if ok && len(ep.Spec) > 0 {
			if err := json.Unmarshal(ep.Spec, c.CurrentSpec()); err != nil {
				return true, fmt.Errorf("reading the recorded %s parameters: %w", e.Name(), err)
			}
		}
		return true, nil
	}
	return false, nil
}
