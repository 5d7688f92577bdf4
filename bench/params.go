package bench

import (
	"encoding/json"
	"fmt"

	"github.com/corepin/corepin/experiment"
)

// Resolver is the optional ability of a Configurable experiment to settle
// what its spec leaves to the machine (a workload "auto") before the run's
// Params are recorded. Resolve changes only the spec.
type Resolver interface {
	Resolve(env *Env)
}

// ResolveParams resolves every experiment of exps (Resolver) and records
// their specs into p.Experiments, in order. Call it after Configure.
func ResolveParams(p experiment.Params, exps []Experiment, env *Env) (experiment.Params, error) {
	p.Experiments = nil
	for _, e := range exps {
		ep := experiment.ExperimentParams{Name: e.Name()}
		if r, ok := e.(Resolver); ok {
			r.Resolve(env)
		}
		if c, ok := e.(experiment.Configurable); ok {
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
