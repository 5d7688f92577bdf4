package alloc

import (
	"math"

	"github.com/corepin/corepin/cpuset"
)

// RequestSpec is a request as people write it in JSON: the request objects
// of `corepin plan` and the arrivals of `corepin simulate` traces. CPUs may
// be fractional for LS and BE (a quota); the exclusive classes take whole
// CPUs, and a fraction without a class is LS.
type RequestSpec struct {
	ID             string   `json:"id,omitempty"`
	CPUs           *float64 `json:"cpus"`
	QoS            string   `json:"qos,omitempty"`
	Bind           string   `json:"bind,omitempty"`
	Exclusive      string   `json:"exclusive,omitempty"`
	NUMA           string   `json:"numa,omitempty"`
	TopologyPolicy string   `json:"topology_policy,omitempty"`
	// Isolated is "prefer" or "require" (isolated CPUs, LSE and LSR only).
	Isolated string `json:"isolated,omitempty"`
}

// MilliCPUs converts a CPU count as written (fractions allowed) to
// thousandths of a CPU, refusing counts no machine has.
func MilliCPUs(id string, cpus float64) (int, error) {
	if cpus < 0 || cpus > cpuset.MaxCPU+1 || math.IsNaN(cpus) {
		return 0, invalid("request %q: cpus %v is outside [0, %d]", id, cpus, cpuset.MaxCPU+1)
	}
	return int(math.Round(cpus * 1000)), nil
}

// Request converts s into the Request of workload id, checking its
// vocabulary and size as Allocate would, so that a typo fails where it was
// written. Fields left empty stay empty (Allocate fills the defaults).
// Errors wrap ErrInvalid.
func (s RequestSpec) Request(id string) (Request, error) {
	if s.CPUs == nil {
		return Request{}, invalid("request %q has no cpus", id)
	}
	m, err := MilliCPUs(id, *s.CPUs)
	if err != nil {
		return Request{}, err
	}
	r := Request{ID: id, QoS: QoS(s.QoS), Bind: Bind(s.Bind), Exclusive: Exclusive(s.Exclusive),
		NUMA: NUMAStrategy(s.NUMA), TopologyPolicy: TopologyPolicy(s.TopologyPolicy), Isolated: IsolatedPolicy(s.Isolated)}
	if m == 0 && *s.CPUs > 0 && (r.QoS == LS || r.QoS == BE || r.QoS == "") {
		return Request{}, invalid("request %q: cpus %v is above 0 but below 0.001, the smallest size (sizes count thousandths of a CPU); ask for 0.001 or more", id, *s.CPUs)
	}
	switch r.QoS {
	case LS, BE:
		r.MilliCPUs = m
	case "":
		if m%1000 != 0 {
			r.QoS, r.MilliCPUs = LS, m
			break
		}
		r.CPUs = m / 1000
	default:
		if m%1000 != 0 {
			return Request{}, invalid("request %q: %s takes whole CPUs, not %v (fractional requests are LS or BE)", id, r.QoS, *s.CPUs)
		}
		r.CPUs = m / 1000
	}
	check := r
	if err := check.normalize(); err != nil {
		return Request{}, err
	}
	return r, nil
}
