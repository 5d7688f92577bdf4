package nri

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/containerd/nri/pkg/api"

	"github.com/corepin/corepin/agent"
	"github.com/corepin/corepin/cpuset"
)

// Pod metadata corepin honours, Koordinator's names.
const (
	// LabelQoSClass is the pod label naming the QoS class: LSE, LSR, LS or
	// BE (Koordinator's SYSTEM is the reserved CPUs and not admitted).
	LabelQoSClass = "koordinator.sh/qosClass"
	// AnnotationResourceSpec is the pod annotation holding a ResourceSpec
	// as JSON.
	AnnotationResourceSpec = "scheduling.koordinator.sh/resource-spec"
	// AnnotationRequiredPlugins is the pod annotation that makes the
	// runtime refuse to start the pod's containers while the named NRI
	// plugins are not connected (with containerd's default validator
	// enabled): '["corepin"]'. NRI is fail-open without it.
	AnnotationRequiredPlugins = "required-plugins.noderesource.dev"
)

// MaxResourceSpec bounds the resource-spec annotation.
const MaxResourceSpec = 4 << 10

// ErrInvalid means a pod's metadata or resources can not be read as a
// corepin request; the container is refused (the runtime reports the
// error) rather than started unpinned against its owner's wish.
var ErrInvalid = errors.New("invalid pod metadata")

// ResourceSpec is the part of Koordinator's resource-spec annotation that
// corepin honours. Koordinator's requiredCPUBindPolicy is read as a bind
// policy too (corepin has no hard/soft split for binding).
type ResourceSpec struct {
	RequiredCPUBindPolicy       string `json:"requiredCPUBindPolicy,omitempty"`
	PreferredCPUBindPolicy      string `json:"preferredCPUBindPolicy,omitempty"`
	PreferredCPUExclusivePolicy string `json:"preferredCPUExclusivePolicy,omitempty"`
}

// resourceSpecKeys are the keys ParseResourceSpec accepts, spelled exactly.
var resourceSpecKeys = map[string]bool{"requiredCPUBindPolicy": true, "preferredCPUBindPolicy": true, "preferredCPUExclusivePolicy": true}

// ParseResourceSpec reads the resource-spec annotation strictly: one JSON
// object of at most MaxResourceSpec bytes, only the keys of ResourceSpec,
// each once and a string, values in Koordinator's vocabulary. Errors wrap
// ErrInvalid.
func ParseResourceSpec(s string) (ResourceSpec, error) {
	if len(s) > MaxResourceSpec {
		return ResourceSpec{}, fmt.Errorf("%w: %s is %d bytes; at most %d", ErrInvalid, AnnotationResourceSpec, len(s), MaxResourceSpec)
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalid, AnnotationResourceSpec, fmt.Sprintf(format, args...))
	}
	dec := json.NewDecoder(strings.NewReader(s))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return ResourceSpec{}, bad("want one JSON object")
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return ResourceSpec{}, bad("%v", err)
		}
		k, _ := t.(string)
		if !resourceSpecKeys[k] {
			return ResourceSpec{}, bad("unknown key %.40q (known: requiredCPUBindPolicy, preferredCPUBindPolicy, preferredCPUExclusivePolicy)", k)
		}
		if seen[k] {
			return ResourceSpec{}, bad("key %q given twice", k)
		}
		seen[k] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return ResourceSpec{}, bad("%v", err)
		}
		if len(v) == 0 || v[0] != '"' {
			return ResourceSpec{}, bad("%s must be a string", k)
		}
	}
	if _, err := dec.Token(); err != nil {
		return ResourceSpec{}, bad("%v", err)
	}
	if _, err := dec.Token(); err == nil {
		return ResourceSpec{}, bad("data after the object")
	}
	var rs ResourceSpec
	d2 := json.NewDecoder(bytes.NewReader([]byte(s)))
	d2.DisallowUnknownFields()
	if err := d2.Decode(&rs); err != nil {
		return ResourceSpec{}, bad("%v", err)
	}
	for _, b := range []string{rs.RequiredCPUBindPolicy, rs.PreferredCPUBindPolicy} {
		switch b {
		case "", "Default", "FullPCPUs", "SpreadByPCPUs":
		case "ConstrainedBurst":
			return ResourceSpec{}, bad("CPU bind policy ConstrainedBurst is not supported by corepin; use Default, FullPCPUs or SpreadByPCPUs")
		default:
			return ResourceSpec{}, bad("CPU bind policy %.40q is not one of Default, FullPCPUs, SpreadByPCPUs", b)
		}
	}
	if rs.RequiredCPUBindPolicy != "" && rs.PreferredCPUBindPolicy != "" && rs.RequiredCPUBindPolicy != rs.PreferredCPUBindPolicy {
		return ResourceSpec{}, bad("requiredCPUBindPolicy %s and preferredCPUBindPolicy %s disagree", rs.RequiredCPUBindPolicy, rs.PreferredCPUBindPolicy)
	}
	switch rs.PreferredCPUExclusivePolicy {
	case "", "None", "PCPULevel", "NUMANodeLevel":
	default:
		return ResourceSpec{}, bad("CPU exclusive policy %.40q is not one of None, PCPULevel, NUMANodeLevel", rs.PreferredCPUExclusivePolicy)
	}
	return rs, nil
}

// bind is the bind policy rs asks for.
func (rs ResourceSpec) bind() string {
	return cmp.Or(rs.RequiredCPUBindPolicy, rs.PreferredCPUBindPolicy)
}

// CPU resources as the kubelet writes them (pkg/kubelet/cm: MilliCPUToShares,
// MilliCPUToQuota).
const (
	minShares     = 2
	sharesPerCPU  = 1024
	defaultPeriod = 100000 // microseconds
	// maxMilli bounds what a container's resources may ask (1<<20 CPUs).
	maxMilli = 1 << 30
)

// sharesOf is the kubelet's cpu.shares for a request of milli CPUs.
func sharesOf(milli int64) uint64 {
	if milli <= 0 {
		return minShares
	}
	return uint64(max(milli*sharesPerCPU/1000, minShares))
}

// cpuOf reads the request (from cpu.shares) and limit (from the CFS
// quota, 0 if none) of a container in millicpus.
func cpuOf(ctr *api.Container) (req, limit int64, shares uint64) {
	cpu := ctr.GetLinux().GetResources().GetCpu()
	shares = cpu.GetShares().GetValue()
	shares = min(shares, sharesOf(maxMilli))
	req = int64((shares*1000 + sharesPerCPU/2) / sharesPerCPU)
	if shares <= minShares {
		req = 0
	}
	if q := cpu.GetQuota().GetValue(); q > 0 {
		period := int64(defaultPeriod)
		if p := cpu.GetPeriod().GetValue(); p >= 1000 && p <= 1000000 { // the kernel's range: 1ms..1s
			period = int64(p)
		}
		q = min(q, maxMilli*period/1000) // no overflow below
		limit = (q*1000 + period - 1) / period
	}
	return min(req, maxMilli), min(limit, maxMilli), shares
}

// SpecOf is the request for container ctr of pod: the QoS class from the
// koordinator.sh/qosClass label, bind and exclusive policies from the
// resource-spec annotation, else the kubelet's semantics from the
// container's CPU resources (Guaranteed with whole CPUs: LSE; Guaranteed
// with a fraction and Burstable: LS; BestEffort: BE). The size is the CPU
// limit where there is one, else the request. Errors wrap ErrInvalid.
func SpecOf(pod *api.PodSandbox, ctr *api.Container) (agent.Spec, string, error) {
	req, limit, shares := cpuOf(ctr)
	milli := limit
	if milli == 0 {
		milli = req
	}
	var s agent.Spec
	why := "label " + LabelQoSClass
	q, labelled := pod.GetLabels()[LabelQoSClass]
	switch {
	case labelled:
		switch q {
		case "LSE", "LSR", "LS", "BE":
		case "SYSTEM":
			return s, "", fmt.Errorf("%w: %s SYSTEM is the node's reserved CPUs; corepin admits LSE, LSR, LS and BE pods", ErrInvalid, LabelQoSClass)
		default:
			return s, "", fmt.Errorf("%w: %s %.20q is not one of LSE, LSR, LS, BE", ErrInvalid, LabelQoSClass, q)
		}
	case limit > 0 && sharesOf(limit) == shares && limit%1000 == 0:
		q, why = "LSE", "kubelet Guaranteed, whole CPUs"
	case limit == 0 && shares <= minShares:
		q, why = "BE", "kubelet BestEffort"
	default:
		q, why = "LS", "kubelet Burstable or fractional Guaranteed"
	}
	s.QoS = q
	switch q {
	case "LSE", "LSR":
		if milli == 0 || milli%1000 != 0 {
			return s, "", fmt.Errorf("%w: a %s container needs whole CPUs (set limits.cpu = requests.cpu to an integer); it has %dm", ErrInvalid, q, milli)
		}
	default:
		milli = max(milli, 1) // LS and BE: at least present
	}
	if milli > (cpuset.MaxCPU+1)*1000 {
		return s, "", fmt.Errorf("%w: the container asks for %dm CPU, more than the %d CPUs corepin can place", ErrInvalid, milli, cpuset.MaxCPU+1)
	}
	cpus := float64(milli) / 1000
	s.CPUs = &cpus
	if a, ok := pod.GetAnnotations()[AnnotationResourceSpec]; ok {
		rs, err := ParseResourceSpec(a)
		if err != nil {
			return s, "", err
		}
		s.Bind, s.Exclusive = rs.bind(), rs.PreferredCPUExclusivePolicy
		if s.Bind == "Default" {
			s.Bind = ""
		}
		why += ", annotation " + AnnotationResourceSpec
	}
	return s, why, nil
}
