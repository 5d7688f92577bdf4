package nodestate

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/topology"
)

// Annotations Koordinator's koordlet writes on a node's
// NodeResourceTopology object (topology.node.k8s.io/v1alpha1), as its
// statesinformer publishes them (apis/extension of
// github.com/koordinator-sh/koordinator). Koord reads them.
const (
	// AnnotationKoordCPUTopology lists every CPU with its core, socket and
	// NUMA node: {"detail":[{"id":0,"core":0,"socket":0,"node":0},...]}.
	AnnotationKoordCPUTopology = "node.koordinator.sh/cpu-topology"
	// AnnotationKoordPodCPUAllocs lists the CPUs the kubelet's static
	// policy gave Guaranteed pods Koordinator does not manage:
	// [{"namespace":"ns","name":"p","uid":"…","cpuset":"4-5","managedByKubelet":true}].
	// koordlet writes "null" for none.
	AnnotationKoordPodCPUAllocs = "node.koordinator.sh/pod-cpu-allocs"
	// AnnotationKoordCPUSharedPools is the LS shared pool per NUMA node:
	// [{"socket":0,"node":0,"cpuset":"0-3"}]: every CPU not held
	// exclusively (by Koordinator's LSE and LSR pods or the kubelet's
	// static policy), not in AnnotationKoordReservation and not exclusive
	// to system QoS pods. The kubelet's reserved CPUs stay in it.
	AnnotationKoordCPUSharedPools = "node.koordinator.sh/cpu-shared-pools"
	// AnnotationKoordBECPUSharedPools is the BE shared pool: the LS pool
	// plus the CPUs of LSR pods (best-effort work may use them).
	AnnotationKoordBECPUSharedPools = "node.koordinator.sh/be-cpu-shared-pools"
	// AnnotationKoordKubeletPolicy is the kubelet's CPU manager policy:
	// {"policy":"static","options":{"full-pcpus-only":"true"},"reservedCPUs":"0-1"}.
	AnnotationKoordKubeletPolicy = "kubelet.koordinator.sh/cpu-manager-policy"
	// AnnotationKoordReservation holds the CPUs the node reserves from
	// every pod: {"reservedCPUs":"0,6"} (koordlet resolves a reservation
	// given as a CPU count to CPUs before it writes the object).
	AnnotationKoordReservation = "node.koordinator.sh/reservation"
	// AnnotationKoordSystemQOS holds the CPUs of system QoS pods,
	// {"cpuset":"0-1","cpusetExclusive":true}; exclusive unless
	// cpusetExclusive is false.
	AnnotationKoordSystemQOS = "node.koordinator.sh/system-qos-resource"
)

// KoordAnnotations are the annotations Koord reads, in the order a cache
// key hashes them.
var KoordAnnotations = []string{AnnotationKoordCPUTopology, AnnotationKoordPodCPUAllocs, AnnotationKoordCPUSharedPools,
	AnnotationKoordBECPUSharedPools, AnnotationKoordKubeletPolicy, AnnotationKoordReservation, AnnotationKoordSystemQOS}

// Held assignment ids of the CPUs Koordinator's own exclusive pods hold,
// as the shared pools show them (the object does not name those pods).
const (
	KoordLSEID = "(koordinator LSE)"
	KoordLSRID = "(koordinator LSR)"
)

// ErrKoord is wrapped by errors about Koordinator's annotations.
var ErrKoord = errors.New("invalid Koordinator NodeResourceTopology annotation")

// maxKoordPools bounds the entries of a shared pool annotation (one per
// NUMA node).
const maxKoordPools = topology.MaxNodeID + 1

// Koord is a node's state as Koordinator's annotations describe it: the
// whole machine, the CPUs no pod may use and the CPUs pods hold
// exclusively, and the allocator that places a pod there.
type Koord struct {
	// Topology is the machine of AnnotationKoordCPUTopology. Koordinator
	// gives no caches: each (socket, NUMA node) counts as one L3, each
	// socket as one die, and each core as its own cluster.
	Topology *topology.Topology
	// Settings are the policy and options: the kubelet engine with the
	// options set "true" when the kubelet's policy is static, corepin
	// with none otherwise. TopologyPolicy is left empty: the object's
	// topologyPolicies or attributes give it; so are Reserved (see
	// Reserved), Bind and NUMA (the Node's labels give them).
	Settings alloc.NodeSettings
	// Reserved is the union of the kubelet's reservedCPUs,
	// AnnotationKoordReservation and the exclusive CPUs of
	// AnnotationKoordSystemQOS.
	Reserved cpuset.CPUSet
	// Held are the exclusive (LSE) holdings of AnnotationKoordPodCPUAllocs,
	// id "namespace/name", and, when AnnotationKoordCPUSharedPools is
	// given, the CPUs outside it held by Koordinator's LSE and LSR pods
	// (KoordLSEID, KoordLSRID; LSR when AnnotationKoordBECPUSharedPools
	// has them). None overlaps Reserved.
	Held []alloc.Assignment
}

// ParseKoord reads Koordinator's annotations from ann. It returns nil and
// no error when AnnotationKoordCPUTopology is absent. An annotation longer
// than MaxAnnotationBytes, not the JSON koordlet writes, naming CPUs
// outside the machine, a CPU twice, ids out of range or more than
// cpuset.MaxCPU+1 CPUs, an unknown kubelet policy or option, is an error
// wrapping ErrKoord that names the annotation.
func ParseKoord(ann map[string]string) (*Koord, error) {
	raw, ok := ann[AnnotationKoordCPUTopology]
	if !ok {
		return nil, nil
	}
	for _, name := range KoordAnnotations {
		if v, ok := ann[name]; ok && len(v) > MaxAnnotationBytes {
			return nil, fmt.Errorf("%w: %s: longer than %d bytes", ErrKoord, name, MaxAnnotationBytes)
		}
	}
	t, err := koordTopology(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrKoord, AnnotationKoordCPUTopology, err)
	}
	k := &Koord{Topology: t}
	machine := t.Online()
	inMachine := func(name, what string, s cpuset.CPUSet) error {
		if !s.IsSubsetOf(machine) {
			return fmt.Errorf("%w: %s: %s CPUs %s are not in %s", ErrKoord, name, what, s.Difference(machine), AnnotationKoordCPUTopology)
		}
		return nil
	}

	var reserved cpuset.Builder
	if v, ok := ann[AnnotationKoordKubeletPolicy]; ok {
		var p struct {
			Policy       string            `json:"policy"`
			Options      map[string]string `json:"options"`
			ReservedCPUs string            `json:"reservedCPUs"`
		}
		if err := decodeKoord(v, &p, '{'); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrKoord, AnnotationKoordKubeletPolicy, err)
		}
		switch p.Policy {
		case "static":
			k.Settings.Policy = alloc.PolicyKubelet
			if len(p.Options) > MaxOptions {
				return nil, fmt.Errorf("%w: %s: %d options, more than %d", ErrKoord, AnnotationKoordKubeletPolicy, len(p.Options), MaxOptions)
			}
			for name, val := range p.Options {
				switch strings.ToLower(val) {
				case "true":
					k.Settings.Options = append(k.Settings.Options, name)
				case "false":
				default:
					return nil, fmt.Errorf("%w: %s: option %s=%q: want true or false", ErrKoord, AnnotationKoordKubeletPolicy, short(name), short(val))
				}
			}
			slices.Sort(k.Settings.Options)
			if err := alloc.CheckOptions(k.Settings.Options); err != nil {
				return nil, fmt.Errorf("%w: %s: options: %w", ErrKoord, AnnotationKoordKubeletPolicy, err)
			}
		case "none", "":
			k.Settings.Policy = alloc.PolicyCorepin
		default:
			return nil, fmt.Errorf("%w: %s: policy %q: want static or none", ErrKoord, AnnotationKoordKubeletPolicy, short(p.Policy))
		}
		s, err := koordSet(p.ReservedCPUs)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: reservedCPUs: %w", ErrKoord, AnnotationKoordKubeletPolicy, err)
		}
		if err := inMachine(AnnotationKoordKubeletPolicy, "reserved", s); err != nil {
			return nil, err
		}
		reserved.AddSet(s)
	} else {
		k.Settings.Policy = alloc.PolicyCorepin
	}
	if v, ok := ann[AnnotationKoordReservation]; ok {
		var r struct {
			ReservedCPUs string `json:"reservedCPUs"`
		}
		if err := decodeKoord(v, &r, '{'); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrKoord, AnnotationKoordReservation, err)
		}
		s, err := koordSet(r.ReservedCPUs)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: reservedCPUs: %w", ErrKoord, AnnotationKoordReservation, err)
		}
		if err := inMachine(AnnotationKoordReservation, "reserved", s); err != nil {
			return nil, err
		}
		reserved.AddSet(s)
	}
	if v, ok := ann[AnnotationKoordSystemQOS]; ok {
		var q struct {
			CPUSet    string `json:"cpuset"`
			Exclusive *bool  `json:"cpusetExclusive"`
		}
		if err := decodeKoord(v, &q, '{'); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrKoord, AnnotationKoordSystemQOS, err)
		}
		s, err := koordSet(q.CPUSet)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: cpuset: %w", ErrKoord, AnnotationKoordSystemQOS, err)
		}
		if err := inMachine(AnnotationKoordSystemQOS, "system QoS", s); err != nil {
			return nil, err
		}
		if q.Exclusive == nil || *q.Exclusive {
			reserved.AddSet(s)
		}
	}
	k.Reserved = reserved.Result()

	var kubeletHeld cpuset.Builder
	if v, ok := ann[AnnotationKoordPodCPUAllocs]; ok {
		var allocs []struct {
			Namespace string `json:"namespace"`
			Name      string `json:"name"`
			UID       string `json:"uid"`
			CPUSet    string `json:"cpuset"`
		}
		if err := decodeKoord(v, &allocs, '['); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrKoord, AnnotationKoordPodCPUAllocs, err)
		}
		if len(allocs) > machine.Size() {
			return nil, fmt.Errorf("%w: %s: %d entries, more than the %d CPUs", ErrKoord, AnnotationKoordPodCPUAllocs, len(allocs), machine.Size())
		}
		ids := map[string]bool{}
		for i, a := range allocs {
			s, err := koordSet(a.CPUSet)
			if err != nil {
				return nil, fmt.Errorf("%w: %s: entry %d: cpuset: %w", ErrKoord, AnnotationKoordPodCPUAllocs, i, err)
			}
			if s.IsEmpty() {
				continue // koord-scheduler skips these too
			}
			if err := inMachine(AnnotationKoordPodCPUAllocs, fmt.Sprintf("entry %d", i), s); err != nil {
				return nil, err
			}
			id := a.Namespace + "/" + a.Name
			if a.Name == "" {
				id = "uid/" + a.UID
				if a.UID == "" {
					id = fmt.Sprintf("%s[%d]", AnnotationKoordPodCPUAllocs, i)
				}
			}
			if ids[id] {
				return nil, fmt.Errorf("%w: %s: pod %s given twice", ErrKoord, AnnotationKoordPodCPUAllocs, short(id))
			}
			ids[id] = true
			if both := s.Intersection(kubeletHeld.Result()); !both.IsEmpty() {
				return nil, fmt.Errorf("%w: %s: CPUs %s held by two pods", ErrKoord, AnnotationKoordPodCPUAllocs, both)
			}
			kubeletHeld.AddSet(s)
			// A CPU reserved after the kubelet gave it stays unusable
			// either way: it counts as reserved.
			if own := s.Difference(k.Reserved); !own.IsEmpty() {
				k.Held = append(k.Held, alloc.Assignment{ID: id, QoS: alloc.LSE, CPUs: own})
			}
		}
	}
	if v, ok := ann[AnnotationKoordCPUSharedPools]; ok {
		ls, err := koordPool(v)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrKoord, AnnotationKoordCPUSharedPools, err)
		}
		if err := inMachine(AnnotationKoordCPUSharedPools, "pool", ls); err != nil {
			return nil, err
		}
		var be cpuset.CPUSet
		if v, ok := ann[AnnotationKoordBECPUSharedPools]; ok {
			if be, err = koordPool(v); err != nil {
				return nil, fmt.Errorf("%w: %s: %w", ErrKoord, AnnotationKoordBECPUSharedPools, err)
			}
			if err := inMachine(AnnotationKoordBECPUSharedPools, "pool", be); err != nil {
				return nil, err
			}
		}
		// Outside the LS pool and not otherwise accounted for: held by
		// Koordinator's own LSE and LSR pods.
		own := machine.Difference(ls).Difference(kubeletHeld.Result()).Difference(k.Reserved)
		if lsr := own.Intersection(be); !lsr.IsEmpty() {
			k.Held = append(k.Held, alloc.Assignment{ID: KoordLSRID, QoS: alloc.LSR, CPUs: lsr})
		}
		if lse := own.Difference(be); !lse.IsEmpty() {
			k.Held = append(k.Held, alloc.Assignment{ID: KoordLSEID, QoS: alloc.LSE, CPUs: lse})
		}
	}
	return k, nil
}

// decodeKoord decodes one JSON value of kind open ('{' or '['; koordlet
// writes null for an empty list, which decodes as none) into v, fields
// matched as encoding/json matches them (case-insensitively; unknown
// fields are skipped: they are Koordinator's to add).
func decodeKoord(s string, v any, open byte) error {
	t := bytes.TrimLeft([]byte(s), " \t\r\n")
	if len(t) == 0 || (t[0] != open && !bytes.HasPrefix(t, []byte("null"))) {
		want := "an object"
		if open == '[' {
			want = "a list"
		}
		return fmt.Errorf("%q is not %s", short(s), want)
	}
	dec := json.NewDecoder(bytes.NewReader(t))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("parsing %q: %w", short(s), err)
	}
	if dec.More() {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// koordSet parses a Linux CPU list as Koordinator writes it ("" is none).
func koordSet(s string) (cpuset.CPUSet, error) {
	set, err := cpuset.Parse(strings.TrimSpace(s))
	if err != nil {
		return cpuset.CPUSet{}, fmt.Errorf("%q: %w", short(s), err)
	}
	return set, nil
}

// koordPool is the union of a shared pool annotation's CPUs.
func koordPool(s string) (cpuset.CPUSet, error) {
	var pools []struct {
		CPUSet string `json:"cpuset"`
	}
	if err := decodeKoord(s, &pools, '['); err != nil {
		return cpuset.CPUSet{}, err
	}
	if len(pools) > maxKoordPools {
		return cpuset.CPUSet{}, fmt.Errorf("%d pools, more than %d", len(pools), maxKoordPools)
	}
	var b cpuset.Builder
	for i, p := range pools {
		set, err := koordSet(p.CPUSet)
		if err != nil {
			return cpuset.CPUSet{}, fmt.Errorf("pool %d: %w", i, err)
		}
		b.AddSet(set)
	}
	return b.Result(), nil
}

// koordTopology builds the machine of AnnotationKoordCPUTopology.
// Koordinator's socket and core ids are renumbered densely (cores keyed by
// socket and core id, so ids repeating across sockets stay apart); NUMA
// node ids are kept.
func koordTopology(raw string) (*topology.Topology, error) {
	var doc struct {
		Detail []struct {
			ID     *int64 `json:"id"`
			Core   int64  `json:"core"`
			Socket int64  `json:"socket"`
			Node   int64  `json:"node"`
		} `json:"detail"`
	}
	if err := decodeKoord(raw, &doc, '{'); err != nil {
		return nil, err
	}
	if len(doc.Detail) == 0 {
		return nil, errors.New("no CPUs in detail")
	}
	if len(doc.Detail) > cpuset.MaxCPU+1 {
		return nil, fmt.Errorf("%d CPUs, more than %d", len(doc.Detail), cpuset.MaxCPU+1)
	}
	type coreKey struct{ socket, core int64 }
	type l3Key struct{ socket, node int64 }
	var sockets []int64
	var cores []coreKey
	var l3s []l3Key
	for i, d := range doc.Detail {
		switch {
		case d.ID == nil:
			return nil, fmt.Errorf("entry %d has no id", i)
		case *d.ID < 0 || *d.ID > cpuset.MaxCPU:
			return nil, fmt.Errorf("cpu %d: id outside [0, %d]", *d.ID, cpuset.MaxCPU)
		case d.Node < 0 || d.Node > topology.MaxNodeID:
			return nil, fmt.Errorf("cpu %d: node %d outside [0, %d]", *d.ID, d.Node, topology.MaxNodeID)
		case d.Socket < 0 || d.Socket > cpuset.MaxCPU:
			return nil, fmt.Errorf("cpu %d: socket %d outside [0, %d]", *d.ID, d.Socket, cpuset.MaxCPU)
		case d.Core < 0 || d.Core > cpuset.MaxCPU:
			return nil, fmt.Errorf("cpu %d: core %d outside [0, %d]", *d.ID, d.Core, cpuset.MaxCPU)
		}
		sockets = append(sockets, d.Socket)
		cores = append(cores, coreKey{d.Socket, d.Core})
		l3s = append(l3s, l3Key{d.Socket, d.Node})
	}
	cmpCore := func(a, b coreKey) int { return cmp.Or(cmp.Compare(a.socket, b.socket), cmp.Compare(a.core, b.core)) }
	cmpL3 := func(a, b l3Key) int { return cmp.Or(cmp.Compare(a.socket, b.socket), cmp.Compare(a.node, b.node)) }
	slices.Sort(sockets)
	sockets = slices.Compact(sockets)
	slices.SortFunc(cores, cmpCore)
	cores = slices.CompactFunc(cores, func(a, b coreKey) bool { return a == b })
	slices.SortFunc(l3s, cmpL3)
	l3s = slices.CompactFunc(l3s, func(a, b l3Key) bool { return a == b })
	cpus := make([]topology.CPU, 0, len(doc.Detail))
	seen := make(map[int64]bool, len(doc.Detail))
	for _, d := range doc.Detail {
		if seen[*d.ID] {
			return nil, fmt.Errorf("cpu %d listed twice", *d.ID)
		}
		seen[*d.ID] = true
		s, _ := slices.BinarySearch(sockets, d.Socket)
		c, _ := slices.BinarySearchFunc(cores, coreKey{d.Socket, d.Core}, cmpCore)
		l, _ := slices.BinarySearchFunc(l3s, l3Key{d.Socket, d.Node}, cmpL3)
		cpus = append(cpus, topology.CPU{ID: int(*d.ID), Online: true, Allowed: true, Socket: topology.SocketID(s), Die: topology.DieID(s),
			Cluster: topology.ClusterID(c), NUMA: topology.NodeID(d.Node), L3: topology.CacheID(l), Core: topology.CoreID(c)})
	}
	t, err := topology.New(cpus, nil)
	if err != nil {
		return nil, err
	}
	return t, nil
}

// topologyPolicyNamed maps the Topology Manager policy names of the
// NodeResourceTopology API and of Koordinator's numa-topology-policy label
// (None, BestEffort, Restricted, SingleNUMANode) to corepin's.
func topologyPolicyNamed(name string) (alloc.TopologyPolicy, bool) {
	switch name {
	case "None":
		return alloc.TopologyNone, true
	case "BestEffort":
		return alloc.TopologyBestEffort, true
	case "Restricted":
		return alloc.TopologyRestricted, true
	case "SingleNUMANode":
		return alloc.TopologySingleNUMANode, true
	}
	return "", false
}

// TopologyPolicyOfNRT maps a v1alpha1 object's topologyPolicies (the
// noderesourcetopology-api names: None, BestEffort, Restricted,
// SingleNUMANode, each also with a ContainerLevel or PodLevel suffix) to
// corepin's topology policy; "" for an empty list. Corepin places per
// container, so the scope is not kept. More than MaxAttributes entries, an
// unknown name or entries naming different policies is an error wrapping
// ErrAllocator.
func TopologyPolicyOfNRT(list []string) (alloc.TopologyPolicy, error) {
	if len(list) > MaxAttributes {
		return "", fmt.Errorf("%w: topologyPolicies: %d entries, more than %d", ErrAllocator, len(list), MaxAttributes)
	}
	var out alloc.TopologyPolicy
	for _, p := range list {
		base := p
		for _, scope := range []string{"ContainerLevel", "PodLevel"} {
			if b, ok := strings.CutSuffix(p, scope); ok {
				base = b
			}
		}
		tp, ok := topologyPolicyNamed(base)
		if !ok {
			return "", fmt.Errorf("%w: topologyPolicies: %q: want None, BestEffort, Restricted or SingleNUMANode, each optionally with ContainerLevel or PodLevel", ErrAllocator, short(p))
		}
		if out != "" && out != tp {
			return "", fmt.Errorf("%w: topologyPolicies %q name different policies", ErrAllocator, list)
		}
		out = tp
	}
	return out, nil
}
