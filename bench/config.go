package bench

import (
	"bytes"
	"fmt"

	"gopkg.in/yaml.v3"
)

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
func Configure(exps []Experiment, data []byte, quick bool) error {
	specs := map[string]any{}
	for _, e := range exps {
		if c, ok := e.(Configurable); ok {
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
