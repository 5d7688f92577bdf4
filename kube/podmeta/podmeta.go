package podmeta

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
)

// Pod metadata corepin honours (Koordinator's names where Koordinator has
// one).
const (
	// LabelQoSClass is the pod label naming the QoS class: LSE, LSR, LS or
	// BE (Koordinator's SYSTEM is the reserved CPUs and not admitted).
	LabelQoSClass = "koordinator.sh/qosClass"
	// AnnotationResourceSpec is the pod annotation holding Koordinator's
	// ResourceSpec as JSON: preferredCPUBindPolicy, requiredCPUBindPolicy,
	// preferredCPUExclusivePolicy.
	AnnotationResourceSpec = "scheduling.koordinator.sh/resource-spec"
	// AnnotationNUMAPolicy is the pod's topology policy, with the kubelet
	// Topology Manager's names: none, best-effort, restricted or
	// single-numa-node. Absent means the node's default.
	AnnotationNUMAPolicy = "corepin.io/numa-policy"
	// AnnotationIsolatedCPUs is how the pod's exclusive containers (LSE,
	// LSR) use the CPUs the kernel keeps apart from general scheduling
	// (isolcpus=, nohz_full=, isolated cgroup v2 partitions):
	// "prefer" takes them first, "require" takes only them or refuses the
	// pod. Absent, they are avoided while the other CPUs suffice. After
	// nri-plugins' prefer-isolated-cpus.resource-policy.nri.io, but per
	// pod only (a scheduler judges a pod as one request) and with
	// corepin's request vocabulary (alloc.IsolatedPolicy).
	AnnotationIsolatedCPUs = "corepin.io/isolated-cpus"
	// AnnotationSched is the LS real-time route of the pod's containers:
	// rr or fifo puts every thread in SCHED_RR or SCHED_FIFO at priority
	// 1 (the runtime applies the OCI linux.scheduler corepin's plugin
	// sets), bounded to the container's CPUs' worth of the LS pool where
	// the kernel groups real-time time; normal (the default) is the fair
	// class. Only LS pods take it.
	AnnotationSched = "corepin.io/sched"
	// AnnotationIRQIsolate keeps movable device interrupts off the CPUs of
	// the pod's exclusive containers (LSE, LSR) while they hold them, as
	// CRI-O's irq-load-balancing.crio.io: disable does: "true" asks for
	// it, "false" opts out of a node that does it for every exclusive pod
	// (the plugin's irq_isolate exclusive). An LS or BE pod shares its
	// CPUs, so "true" is refused there. docs/reference/irq.md.
	AnnotationIRQIsolate = "corepin.io/irq-isolate"
	// AnnotationRequiredPlugins is the pod annotation that makes the
	// runtime refuse to start the pod's containers while the named NRI
	// plugins are not connected (with containerd's default validator
	// enabled): '["corepin"]'. NRI is fail-open without it.
	AnnotationRequiredPlugins = "required-plugins.noderesource.dev"
)

// MaxResourceSpec bounds the resource-spec annotation, in bytes.
const MaxResourceSpec = 4 << 10

// MaxMilliCPUs bounds the size of a wish: every CPU corepin can place.
const MaxMilliCPUs = (cpuset.MaxCPU + 1) * 1000

// ErrInvalid means a pod's metadata or resources can not be read as a
// corepin request.
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
// each once and a string, values in Koordinator's vocabulary, and required
// and preferred bind policies that agree. Errors wrap ErrInvalid.
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

// Bind is the bind policy rs asks for: the required one, else the
// preferred one; "" for none or Default (the allocator's default).
func (rs ResourceSpec) Bind() string {
	b := cmp.Or(rs.RequiredCPUBindPolicy, rs.PreferredCPUBindPolicy)
	if b == string(alloc.BindDefault) {
		return ""
	}
	return b
}

// ParseNUMAPolicy checks the value of AnnotationNUMAPolicy: one of none,
// best-effort, restricted, single-numa-node, spelled exactly. Errors wrap
// ErrInvalid and name the annotation and the allowed values.
func ParseNUMAPolicy(s string) (alloc.TopologyPolicy, error) {
	switch p := alloc.TopologyPolicy(s); p {
	case alloc.TopologyNone, alloc.TopologyBestEffort, alloc.TopologyRestricted, alloc.TopologySingleNUMANode:
		return p, nil
	}
	return "", fmt.Errorf("%w: annotation %s %.40q is not one of none, best-effort, restricted, single-numa-node", ErrInvalid, AnnotationNUMAPolicy, s)
}

// ParseIsolatedCPUs checks the value of AnnotationIsolatedCPUs: prefer or
// require, spelled exactly. Errors wrap ErrInvalid and name the annotation
// and the allowed values.
func ParseIsolatedCPUs(s string) (alloc.IsolatedPolicy, error) {
	switch p := alloc.IsolatedPolicy(s); p {
	case alloc.IsolatedPrefer, alloc.IsolatedRequire:
		return p, nil
	}
	return "", fmt.Errorf("%w: annotation %s %.40q is not one of prefer, require (leave it out to keep off isolated CPUs while others suffice)", ErrInvalid, AnnotationIsolatedCPUs, s)
}

// ParseIRQIsolate checks the value of AnnotationIRQIsolate: true or
// false, spelled exactly (strconv.ParseBool's "1", "t" and "TRUE" are
// refused, as are surrounding spaces). Errors wrap ErrInvalid and name the
// annotation and the allowed values.
func ParseIRQIsolate(s string) (bool, error) {
	switch s {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("%w: annotation %s %.20q: use \"true\" or \"false\"", ErrInvalid, AnnotationIRQIsolate, s)
}

// KubeletQoS is the kubelet's QoS class of a pod (status.qosClass).
type KubeletQoS string

// The kubelet's QoS classes.
const (
	Guaranteed KubeletQoS = "Guaranteed"
	Burstable  KubeletQoS = "Burstable"
	BestEffort KubeletQoS = "BestEffort"
)

// Pod is what Read needs of a pod (or of one container of it): its
// metadata, the kubelet's QoS class and the CPUs to place.
type Pod struct {
	Labels      map[string]string
	Annotations map[string]string
	// Kubelet is the kubelet's QoS class, used when the pod has no
	// LabelQoSClass; "" reads as BestEffort.
	Kubelet KubeletQoS
	// MilliCPUs is the size to place, in millicpus (the pod's effective
	// request for the scheduler, a container's limit or request on the
	// node). Negative reads as 0.
	MilliCPUs int64
	// NoCPULimit says MilliCPUs is a request alone: the container (for
	// the scheduler, a container of the pod) has no CPU limit. An
	// exclusive class (LSE, LSR) needs one, as Koordinator's webhook
	// requires limits.cpu = requests.cpu of such pods.
	NoCPULimit bool
}

// Wish is what a pod asks corepin for: the fields of an
// alloc.RequestSpec, and why that class.
type Wish struct {
	QoS            alloc.QoS
	MilliCPUs      int64
	Bind           string // "" is the allocator's default
	Exclusive      string
	TopologyPolicy string // "" is the node's default
	// Isolated is "prefer" or "require" (AnnotationIsolatedCPUs) for an
	// exclusive class, else "".
	Isolated string
	// Sched is "rr" or "fifo" (AnnotationSched) for an LS pod, else "".
	Sched string
	// IRQIsolate is what the pod says of AnnotationIRQIsolate: nil when
	// it says nothing (the node's setting decides), else true (only for
	// LSE and LSR) or false.
	IRQIsolate *bool
	// Why says where the class came from ("label koordinator.sh/qosClass",
	// "kubelet Guaranteed, whole CPUs", ...) and which annotations were
	// read.
	Why string
}

// RequestSpec is w as the allocator's request document.
func (w Wish) RequestSpec() alloc.RequestSpec {
	cpus := float64(w.MilliCPUs) / 1000
	return alloc.RequestSpec{CPUs: &cpus, QoS: string(w.QoS), Bind: w.Bind, Exclusive: w.Exclusive, TopologyPolicy: w.TopologyPolicy, Isolated: w.Isolated}
}

// Read decides p's wish. The class is LabelQoSClass when set (LSE, LSR,
// LS or BE; SYSTEM and anything else are refused), else the kubelet's:
// Guaranteed with whole CPUs is LSE, Guaranteed with a fraction and
// Burstable are LS, BestEffort is BE. An exclusive class (LSE, LSR) needs
// whole CPUs and a CPU limit (a labelled container without one is
// refused, never given exclusive CPUs by its request); an LS pod of no
// CPUs has nothing to hold in the shared pool and is BE. Bind and exclusive policies come from AnnotationResourceSpec
// (ParseResourceSpec), the topology policy from AnnotationNUMAPolicy
// (ParseNUMAPolicy), the use of isolated CPUs from AnnotationIsolatedCPUs
// (ParseIsolatedCPUs): taken by LSE and LSR, ignored as "prefer" by the
// shared classes (LS, BE), whose pool never holds an isolated CPU, and
// refused as "require" there; AnnotationIRQIsolate (ParseIRQIsolate)
// is kept as said, its true refused for LS and BE. Errors wrap
// ErrInvalid.
func Read(p Pod) (Wish, error) {
	milli := max(p.MilliCPUs, 0)
	if milli > MaxMilliCPUs {
		return Wish{}, fmt.Errorf("%w: %dm CPU asked, more than the %d CPUs corepin can place", ErrInvalid, milli, cpuset.MaxCPU+1)
	}
	w := Wish{MilliCPUs: milli}
	q, labelled := p.Labels[LabelQoSClass]
	switch {
	case labelled:
		switch alloc.QoS(q) {
		case alloc.LSE, alloc.LSR, alloc.LS, alloc.BE:
		case alloc.SYSTEM:
			return Wish{}, fmt.Errorf("%w: %s SYSTEM is the node's reserved CPUs; corepin admits LSE, LSR, LS and BE pods", ErrInvalid, LabelQoSClass)
		default:
			return Wish{}, fmt.Errorf("%w: %s %.20q is not one of LSE, LSR, LS, BE", ErrInvalid, LabelQoSClass, q)
		}
		w.QoS, w.Why = alloc.QoS(q), "label "+LabelQoSClass
	case p.Kubelet == Guaranteed && milli > 0 && milli%1000 == 0:
		w.QoS, w.Why = alloc.LSE, "kubelet Guaranteed, whole CPUs"
	case p.Kubelet == Guaranteed || p.Kubelet == Burstable:
		w.QoS, w.Why = alloc.LS, "kubelet Burstable or fractional Guaranteed"
	default:
		w.QoS, w.Why = alloc.BE, "kubelet BestEffort"
	}
	switch w.QoS {
	case alloc.LSE, alloc.LSR:
		if p.NoCPULimit {
			return Wish{}, fmt.Errorf("%w: class %s (%s) needs exclusive whole CPUs sized by a CPU limit: set limits.cpu = requests.cpu to an integer, "+
				"or label the pod LS to share the pool; it asks for %s CPU with no CPU limit", ErrInvalid, w.QoS, w.Why, strconv.FormatFloat(float64(milli)/1000, 'f', -1, 64))
		}
		if milli == 0 || milli%1000 != 0 {
			return Wish{}, fmt.Errorf("%w: class %s needs whole CPUs (set limits.cpu = requests.cpu to an integer); it asks for %s CPU", ErrInvalid, w.QoS, strconv.FormatFloat(float64(milli)/1000, 'f', -1, 64))
		}
	case alloc.LS:
		if milli == 0 {
			w.QoS, w.Why = alloc.BE, w.Why+", no CPUs to hold in the shared pool"
		}
	}
	if a, ok := p.Annotations[AnnotationResourceSpec]; ok {
		rs, err := ParseResourceSpec(a)
		if err != nil {
			return Wish{}, err
		}
		w.Bind, w.Exclusive = rs.Bind(), rs.PreferredCPUExclusivePolicy
		w.Why += ", annotation " + AnnotationResourceSpec
	}
	if a, ok := p.Annotations[AnnotationNUMAPolicy]; ok {
		tp, err := ParseNUMAPolicy(a)
		if err != nil {
			return Wish{}, err
		}
		w.TopologyPolicy = string(tp)
		w.Why += ", annotation " + AnnotationNUMAPolicy
	}
	if a, ok := p.Annotations[AnnotationIsolatedCPUs]; ok {
		ip, err := ParseIsolatedCPUs(a)
		if err != nil {
			return Wish{}, err
		}
		switch {
		case w.QoS == alloc.LSE || w.QoS == alloc.LSR:
			w.Isolated = string(ip)
			w.Why += ", annotation " + AnnotationIsolatedCPUs
		case ip == alloc.IsolatedRequire:
			return Wish{}, fmt.Errorf("%w: annotation %s require is for LSE and LSR pods (exclusive, whole CPUs); this one is %s (%s), and the shared pool never holds isolated CPUs", ErrInvalid, AnnotationIsolatedCPUs, w.QoS, w.Why)
		default:
			w.Why += ", annotation " + AnnotationIsolatedCPUs + " prefer ignored (the shared pool never holds isolated CPUs)"
		}
	}
	if a, ok := p.Annotations[AnnotationSched]; ok {
		switch {
		case a != "normal" && a != "rr" && a != "fifo":
			return Wish{}, fmt.Errorf("%w: annotation %s %.20q: use normal, rr or fifo", ErrInvalid, AnnotationSched, a)
		case a != "normal" && w.QoS != alloc.LS:
			return Wish{}, fmt.Errorf("%w: annotation %s %s is the real-time route of LS pods on the shared pool, beside BE work; this one is %s (%s): make it Burstable or label it LS (an LSE or LSR pod has CPUs of its own, a BE pod must never preempt others)",
				ErrInvalid, AnnotationSched, a, w.QoS, w.Why)
		case a != "normal":
			w.Sched = a
			w.Why += ", annotation " + AnnotationSched
		}
	}
	if a, ok := p.Annotations[AnnotationIRQIsolate]; ok {
		on, err := ParseIRQIsolate(a)
		if err != nil {
			return Wish{}, err
		}
		if on && w.QoS != alloc.LSE && w.QoS != alloc.LSR {
			return Wish{}, fmt.Errorf("%w: annotation %s true keeps interrupts off CPUs of the pod's own; this one is %s (%s) and shares its CPUs: "+
				"give it whole CPUs with limits.cpu = requests.cpu (LSE) or label it LSE or LSR", ErrInvalid, AnnotationIRQIsolate, w.QoS, w.Why)
		}
		w.IRQIsolate = &on
		w.Why += ", annotation " + AnnotationIRQIsolate
	}
	return w, nil
}
