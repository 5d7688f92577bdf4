package agent

import (
	"testing"

	"github.com/corepin/corepin/nodecore"
)

// TestAdmissionPhases: a create of a command tells a PhaseObserver where
// its time went, each phase it ran timed, and the phases within the
// admission's own duration.
func TestAdmissionPhases(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec Spec
	}{
		{name: "LSE", spec: Spec{Name: "ph-lse", QoS: "LSE", CPUs: f64(1), Command: "sleep", Args: []string{"600"}}},
		{name: "LS", spec: Spec{Name: "ph-ls", QoS: "LS", CPUs: f64(0.5), Command: "sleep", Args: []string{"600"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := &phaseLog{}
			n, _ := newNode(t, func(o *Options) { o.Observer = log })
			if _, err := n.Create(tc.spec); err != nil {
				t.Fatal(err)
			}
			defer n.Delete(tc.spec.Name)
			if len(log.phases) != 1 || len(log.total) != 1 {
				t.Fatalf("observer told of %d phases and %d admissions, want 1 and 1", len(log.phases), len(log.total))
			}
			p := log.phases[0]
			for name, d := range map[string]int64{"commit": int64(p.Commit), "group": int64(p.Group), "start": int64(p.Start)} {
				if d <= 0 {
					t.Errorf("phase %s = %d, want > 0 (phases %+v)", name, d, p)
				}
			}
			if sum := p.Commit + p.Pools + p.Group + p.Start; sum > log.total[0] {
				t.Errorf("phases sum to %v, more than the admission's %v (%+v)", sum, log.total[0], p)
			}
		})
	}
}

var _ nodecore.PhaseObserver = (*phaseLog)(nil)
