// Package fromcluster reads a Kubernetes cluster's nodes as the nodes
// `corepin simulate --from-cluster` replays over: each node's machine,
// held CPUs and allocator settings, decoded as the scheduler extender
// decodes them (kube/nodestate), from its corepin annotations or, with
// a NodeResourceTopology resource, from its object.
package fromcluster

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/kube/kubeclient"
	"github.com/corepin/corepin/kube/nodestate"
	"github.com/corepin/corepin/sim"
	"github.com/corepin/corepin/topology"
)

// Skipped is a cluster node Read leaves out, and why.
type Skipped struct {
	Node   string `json:"node"`
	Reason string `json:"reason"`
}

// PageSize is the Nodes (and NodeResourceTopology objects) asked for per
// list request.
const PageSize = 500

// ErrTooMany is matched (errors.Is) by the error about a cluster of more
// nodes or NodeResourceTopology objects than simulate replays over
// (sim.MaxNodes).
var ErrTooMany = errors.New("more nodes than simulate replays over")

// tooMany is an error that matches ErrTooMany.
type tooMany string

func (e tooMany) Error() string        { return string(e) }
func (e tooMany) Is(target error) bool { return target == ErrTooMany }

// View is what Read reads of a cluster.
type View struct {
	// Nodes are the simulated nodes, in the order listed; Skipped the
	// nodes left out.
	Nodes   []sim.Node
	Skipped []Skipped
	// topologyPolicies counts the simulated nodes by the default topology
	// policy their corepin.io/allocator names ("none" when it names
	// none); unpublished counts those without a readable one.
	topologyPolicies map[alloc.TopologyPolicy]int
	unpublished      int
	// Published counts the simulated nodes that publish allocator
	// settings (sim.Node.Settings), which scenario as-deployed replays
	// them under.
	Published int
	// Sources name where each of Nodes came from, in their order.
	Sources []Source
	// NRTResource is the NodeResourceTopology group version listed (""
	// without one).
	NRTResource string
	// checked are canRun's answers.
	checked map[machineConfig]error
}

// NRTCounts are the simulated nodes from NodeResourceTopology objects:
// Koordinator's and zones'.
func (v View) NRTCounts() (koord, zones int) {
	for _, s := range v.Sources {
		switch s.Source {
		case SourceNRTKoord:
			koord++
		case SourceNRTZones:
			zones++
		}
	}
	return koord, zones
}

// NodesTopologyPolicy is the default topology policy every simulated node
// publishes, ok false when some node publishes none or they differ.
func (v View) NodesTopologyPolicy() (tp alloc.TopologyPolicy, ok bool) {
	if v.unpublished > 0 || len(v.topologyPolicies) != 1 {
		return "", false
	}
	for tp := range v.topologyPolicies {
		return tp, true
	}
	return "", false
}

// Where a simulated node's machine comes from (Source.Source).
const (
	// SourceCorepin: the Node's corepin.io/topology and corepin.io/assigned.
	SourceCorepin = "corepin"
	// SourceNRTKoord: Koordinator's annotations on its
	// NodeResourceTopology (the whole machine, reserved and held CPUs).
	SourceNRTKoord = "nrt-koordinator"
	// SourceNRTZones: the free CPUs per NUMA node of its
	// NodeResourceTopology's zones, as a stand-in machine.
	SourceNRTZones = "nrt-zones"
)

// Source names where a simulated node's machine came from, and the
// allocator settings it publishes (scenario as-deployed replays it under
// them; none: corepin's defaults).
type Source struct {
	Node     string           `json:"node"`
	Source   string           `json:"source"`
	Settings *sim.SettingsDoc `json:"settings,omitempty"`
}

// Read lists the cluster's Node objects, a page at a time and at
// most sim.MaxNodes, and makes each one publishing corepin's
// corepin.io/topology annotation a simulated node, its
// corepin.io/assigned CPUs held. With nrtRes (not empty: simulate --nrt),
// it first lists the cluster's NodeResourceTopology objects of that
// resource, the same way and as bounded, and makes each node without
// corepin's annotations but with an object of its name a simulated node
// as the extender judges it (nodestate.ParseNRT): Koordinator's machine
// with its reserved and held CPUs held, else the stand-in machine of its
// zones' free CPUs. Nodes publishing the same machine share one topology.
// Other nodes, and nodes whose annotation or object does not read, are
// returned as skipped with the reason. Each simulated node carries the
// allocator settings it publishes (corepinSettings: corepin.io/allocator;
// nrtSettings: the object's, or Koordinator's kubelet and node labels),
// which scenario as-deployed replays it under; a node whose settings do
// not read, or that its machine can not run, is skipped with the reason,
// as the extender fails it. Each simulated node's default topology policy,
// when it publishes one (corepin.io/allocator; the object's attributes or
// topologyPolicies, or Koordinator's label), is counted.
// More than sim.MaxNodes nodes or objects is an error matching
// ErrTooMany.
func Read(ctx context.Context, api kubeclient.Reader, nrtRes schema.GroupVersionResource) (View, error) {
	v := View{topologyPolicies: map[alloc.TopologyPolicy]int{}}
	var objects map[string]nrtObject
	if !nrtRes.Empty() {
		var err error
		if objects, err = listNRT(ctx, api, nrtRes); err != nil {
			return View{}, err
		}
		v.NRTResource = nrtRes.GroupVersion().String()
	}
	machines := map[string]*topology.Topology{}
	share := func(key string, t *topology.Topology) *topology.Topology {
		if m, ok := machines[key]; ok {
			return m
		}
		machines[key] = t
		return t
	}
	opts := metav1.ListOptions{Limit: PageSize}
	seen := 0
	for {
		list, err := api.ListNodes(ctx, opts)
		if err != nil {
			return View{}, fmt.Errorf("listing the cluster's nodes: %w", err)
		}
		for i := range list.Items {
			n := &list.Items[i]
			if seen++; seen > sim.MaxNodes {
				return View{}, tooMany(fmt.Sprintf("the cluster has more than %d nodes, the most simulate replays over", sim.MaxNodes))
			}
			t, held, ok, err := nodestate.NodeTopology(n)
			switch {
			case !ok:
				v.fromNRT(n, objects, share)
				continue
			case err != nil:
				v.skip(n.Name, err.Error())
				continue
			}
			t = share("corepin\x00"+n.Annotations[nodestate.AnnotationTopology], t)
			set, err := corepinSettings(n, t, v.canRun)
			if err != nil {
				v.skip(n.Name, err.Error())
				continue
			}
			var tp alloc.TopologyPolicy
			if set != nil {
				tp = set.TopologyPolicy
			}
			v.add(sim.Node{Name: n.Name, Topology: t, Held: held, Settings: set}, SourceCorepin, tp, set != nil)
		}
		if list.Continue == "" {
			return v, nil
		}
		opts.Continue = list.Continue
	}
}

// canRun reports whether machine t runs the allocator configuration cfg
// (alloc.NewState accepts it), asking once per machine, engine and options:
// nodes of one machine share one topology (share).
func (v *View) canRun(t *topology.Topology, cfg alloc.NodeSettings) error {
	k := machineConfig{t, string(cfg.Policy) + "\x00" + strings.Join(cfg.Options, ",")}
	if err, ok := v.checked[k]; ok {
		return err
	}
	_, err := alloc.NewState(t, cfg)
	if v.checked == nil {
		v.checked = map[machineConfig]error{}
	}
	v.checked[k] = err
	return err
}

// machineConfig keys canRun's answers.
type machineConfig struct {
	t   *topology.Topology
	cfg string
}

// add makes n a simulated node from source, counting it when it
// publishes settings, and counts its default topology policy tp when it
// publishes one (ok).
func (v *View) add(n sim.Node, source string, tp alloc.TopologyPolicy, ok bool) {
	v.Nodes = append(v.Nodes, n)
	src := Source{Node: n.Name, Source: source}
	if set := n.Settings; set != nil {
		v.Published++
		doc := sim.SettingsDocOf(*set)
		src.Settings = &doc
	}
	v.Sources = append(v.Sources, src)
	if ok {
		v.topologyPolicies[cmp.Or(tp, alloc.TopologyNone)]++
	} else {
		v.unpublished++
	}
}

// corepinSettings are the allocator settings node n publishes in its
// corepin.io/allocator annotation, nil when it publishes none (no
// annotation, or an empty one), checked against its machine t as the
// extender checks them. A malformed annotation, or settings the machine
// can not run, is an error naming the annotation.
func corepinSettings(n *corev1.Node, t *topology.Topology, canRun func(*topology.Topology, alloc.NodeSettings) error) (*alloc.NodeSettings, error) {
	raw, ok := n.Annotations[nodestate.AnnotationAllocator]
	if !ok || strings.TrimSpace(raw) == "" {
		return nil, nil
	}
	a, err := nodestate.ParseAllocator(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", nodestate.AnnotationAllocator, err)
	}
	set := a.Settings()
	if err := canRun(t, set); err != nil {
		return nil, fmt.Errorf("%s: settings the node's machine can not run: %w", nodestate.AnnotationAllocator, err)
	}
	set.Policy = cmp.Or(set.Policy, alloc.PolicyCorepin)
	return &set, nil
}

// nrtSettings are the allocator settings the node of NodeResourceTopology
// n runs under (set, as nodestate.NRTNode.JudgedSettings gives them for the
// node's labels) on machine t, nil for an object that names none. Settings
// the machine can not run are an error.
func nrtSettings(n nodestate.NRTNode, set alloc.NodeSettings, t *topology.Topology, canRun func(*topology.Topology, alloc.NodeSettings) error) (*alloc.NodeSettings, error) {
	if n.Koord == nil && set.Policy == "" && len(set.Options) == 0 && set.TopologyPolicy == "" {
		return nil, nil
	}
	policy := cmp.Or(set.Policy, alloc.PolicyCorepin)
	if err := canRun(t, alloc.NodeSettings{Policy: policy, Options: set.Options}); err != nil {
		return nil, fmt.Errorf("NodeResourceTopology: settings the node's machine can not run: %w", err)
	}
	return &alloc.NodeSettings{Policy: policy, Options: slices.Clone(set.Options), TopologyPolicy: set.TopologyPolicy, Bind: set.Bind, NUMA: set.NUMA}, nil
}

func (v *View) skip(node, reason string) {
	v.Skipped = append(v.Skipped, Skipped{Node: node, Reason: reason})
}

// fromNRT makes node n, which has no corepin.io/topology, a simulated
// node from its NodeResourceTopology object in objects (nil: simulate
// without --nrt), or skips it with the reason.
func (v *View) fromNRT(n *corev1.Node, objects map[string]nrtObject, share func(string, *topology.Topology) *topology.Topology) {
	const noTopology = "no " + nodestate.AnnotationTopology + " annotation (the corepin agent or NRI plugin publishes it)"
	if objects == nil {
		v.skip(n.Name, noTopology)
		return
	}
	if _, ok := n.Annotations[nodestate.AnnotationNUMAFree]; ok {
		// The extender judges it by its corepin annotation, not its
		// object: replaying over the object would not agree.
		v.skip(n.Name, "publishes only "+nodestate.AnnotationNUMAFree+", too little to replay over; corepin's annotations win over its NodeResourceTopology")
		return
	}
	o, ok := objects[n.Name]
	switch {
	case !ok:
		v.skip(n.Name, noTopology+" and no NodeResourceTopology object")
		return
	case o.err != nil:
		v.skip(n.Name, o.err.Error())
		return
	}
	t, held, err := o.node.Machine()
	if err != nil {
		v.skip(n.Name, err.Error())
		return
	}
	judged, err := o.node.JudgedSettings(n.Labels)
	if err != nil {
		v.skip(n.Name, err.Error())
		return
	}
	tp := judged.TopologyPolicy
	t = share(o.machine, t)
	set, err := nrtSettings(o.node, judged, t, v.canRun)
	if err != nil {
		v.skip(n.Name, err.Error())
		return
	}
	source := SourceNRTZones
	if o.node.Koord != nil {
		source = SourceNRTKoord
	}
	v.add(sim.Node{Name: n.Name, Topology: t, Held: held, Settings: set}, source, tp, tp != "")
}

// nrtObject is one NodeResourceTopology object as read (nodestate.ParseNRT),
// or the error reading it, and the key of its machine.
type nrtObject struct {
	node    nodestate.NRTNode
	err     error
	machine string
}

// listNRT lists the cluster's NodeResourceTopology objects of resource
// res, a page at a time and at most sim.MaxNodes, and reads each as the
// extender does, by name. Only what each object's node needs is kept.
func listNRT(ctx context.Context, api kubeclient.Reader, res schema.GroupVersionResource) (map[string]nrtObject, error) {
	out := map[string]nrtObject{}
	opts := metav1.ListOptions{Limit: PageSize}
	seen := 0
	for {
		list, err := api.ListClusterObjects(ctx, res, opts)
		if err != nil {
			return nil, fmt.Errorf("listing the cluster's NodeResourceTopology objects (%s): %w", res.GroupVersion(), err)
		}
		for i := range list.Items {
			u := &list.Items[i]
			if seen++; seen > sim.MaxNodes {
				return nil, tooMany(fmt.Sprintf("the cluster has more than %d NodeResourceTopology objects, the most simulate replays over", sim.MaxNodes))
			}
			n, err := nodestate.ParseNRT(u)
			o := nrtObject{node: n, err: err}
			if err == nil {
				o.machine = machineKey(u, n)
			}
			out[u.GetName()] = o
		}
		if list.GetContinue() == "" {
			return out, nil
		}
		opts.Continue = list.GetContinue()
	}
}

// machineKey names the machine of an object read as n: a hash of
// Koordinator's CPU topology annotation, or the free CPU counts.
func machineKey(u *unstructured.Unstructured, n nodestate.NRTNode) string {
	if n.Koord != nil {
		sum := sha256.Sum256([]byte(u.GetAnnotations()[nodestate.AnnotationKoordCPUTopology]))
		return "nrt-koordinator\x00" + string(sum[:])
	}
	return fmt.Sprint("nrt-zones\x00", n.Free)
}
