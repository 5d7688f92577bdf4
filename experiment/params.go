package experiment

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"gopkg.in/yaml.v3"
)

// ErrUsage is wrapped by errors about bad experiment input (an unknown
// experiment, a bad spec).
var ErrUsage = errors.New("invalid bench input")

// Named is anything with an experiment's command-line name
// ("concurrency").
type Named interface {
	Name() string
}

// Configurable is the optional ability of an experiment to take its
// parameters (its named spec) from a YAML file. Spec returns a pointer to the
// experiment's spec, filled with the defaults for quick or full runs; the
// YAML section named after the experiment is decoded over it.
type Configurable interface {
	Spec(quick bool) any
	// CurrentSpec returns a pointer to the spec as configured, without
	// resetting it.
	CurrentSpec() any
}

// Configure applies the YAML document data (may be empty) to exps: each
// top-level key names an experiment and holds its spec. Unknown
// experiments and unknown fields are errors that say what is known.
func Configure[E Named](exps []E, data []byte, quick bool) error {
	specs := map[string]any{}
	for _, e := range exps {
		if c, ok := any(e).(Configurable); ok {
			specs[e.Name()] = c.Spec(quick)
		}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	var doc map[string]yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("%w: parsing bench spec: %v", ErrUsage, err)
	}
	for name, node := range doc {
		if err := checkLists(name, &node); err != nil {
			return err
		}
		spec, ok := specs[name]
		if !ok {
			return fmt.Errorf("%w: bench spec names experiment %q, which is not selected or has no parameters", ErrUsage, name)
		}
		var buf bytes.Buffer
		enc := yaml.NewEncoder(&buf)
		if err := enc.Encode(&node); err != nil {
			return fmt.Errorf("%w: bench spec %s: %v", ErrUsage, name, err)
		}
		dec := yaml.NewDecoder(&buf)
		dec.KnownFields(true)
		if err := dec.Decode(spec); err != nil {
			return fmt.Errorf("%w: bench spec %s: %v", ErrUsage, name, err)
		}
	}
	return nil
}

// MaxSpecList bounds every list of a bench spec (modes, concurrency
// levels, CPUs per job, ...): an experiment measures the product of its
// lists, so a long one would plan more points than any run could measure.
const MaxSpecList = 64

// checkLists refuses a list of more than MaxSpecList values anywhere in
// the spec node n of experiment name.
func checkLists(name string, n *yaml.Node) error {
	if n.Kind == yaml.SequenceNode && len(n.Content) > MaxSpecList {
		return fmt.Errorf("%w: bench spec %s: a list of %d values at line %d: at most %d", ErrUsage, name, len(n.Content), n.Line, MaxSpecList)
	}
	for _, c := range n.Content {
		if err := checkLists(name, c); err != nil {
			return err
		}
	}
	return nil
}

// Params is the full, resolved parameters of one bench run: its flags and,
// per experiment, the spec it ran with after defaults, the --spec file and
// what the machine settled (a workload "auto" resolved to transcode or
// spin). It is stored with the run as one JSON document (store.Run.Params),
// and bench.Rebuild analyses from it, so a report regenerated from the
// database analyses exactly what was run.
type Params struct {
	Quick   bool   `json:"quick"`
	Repeats int    `json:"repeats"`
	Seed    uint64 `json:"seed,omitempty"`
	Driver  string `json:"driver"`
	// Argv is the bench command as run ("corepin", "bench", ...), word by
	// word; the report's per-experiment command edits it, never a joined
	// command line.
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
func (p Params) Apply(e Named) (bool, error) {
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
