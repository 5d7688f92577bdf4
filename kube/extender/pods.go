package extender

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/corepin/corepin/alloc"
)

// PodResource is the core pods resource PodStore.Watch lists and watches.
var PodResource = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// DefaultMaxPods bounds the pods a PodStore keeps by default: the most
// pods Kubernetes is tested with in one cluster.
const DefaultMaxPods = 150000

// BoundPodSelector is the field selector of the pods PodStore.Watch keeps:
// bound to a node and not finished.
const BoundPodSelector = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"

// PodStore keeps the pods bound to nodes that ask for CPUs (every QoS class
// but BE), with their allocation requests (RequestOf), for WithPods. A
// node whose corepin.io/allocator says its AnnotationAssigned names the
// pods it admitted (nodestate.Allocator.PodUIDs) is judged with the pods bound
// to it that no entry names placed first, in the order the store first
// saw them bound: pods the scheduler bound a moment ago and the node's NRI
// plugin has not admitted and published yet. A node judged by its
// NodeResourceTopology object (WithNRT), which names no pods, is judged
// with the pods bound to it after the object last changed placed first
// (those bound before the extender started are taken to be in it): pods
// koordlet or the topology exporter has not reported yet. Without them a burst of pods
// would all be judged on the same free CPUs, and the node would refuse
// those past what it has, after the scheduler bound them. kube-scheduler
// counts the same pods in its own resource fit; this is their CPUs'
// placement.
//
// It keeps at most max pods: one more is logged once and ignored until
// others go. Its methods are safe for concurrent use.
type PodStore struct {
	mu     sync.RWMutex
	byUID  map[string]*boundPod
	byNode map[string]*nodePods
	max    int
	full   sync.Once
	log    *slog.Logger
}

// changes orders what the extender learns: each change of the pods bound
// to a node (nodePods.gen), and each change of what a node's
// NodeResourceTopology object publishes, takes the next number. A pod
// bound after its node's object last changed is not in that object yet.
var changes atomic.Uint64

// nodePods are the pods bound to one node, in the order first seen bound;
// gen changes (to the next number of changes) whenever they or a request
// of theirs do.
type nodePods struct {
	pods []*boundPod
	gen  uint64
}

// boundPod is a pod PodStore keeps.
type boundPod struct {
	uid, node string
	// bound orders the pod's binding against the changes of its node's
	// NodeResourceTopology object (changes); 0 for a pod of the first
	// list, which the objects listed with it are taken to hold.
	bound uint64
	req   alloc.Request
	// print names req: a pod resized in place gets a new one, a status
	// update keeps it.
	print string
}

// NewPodStore returns an empty store of at most max pods logging to log
// (nil: discarded).
func NewPodStore(max int, log *slog.Logger) *PodStore {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &PodStore{byUID: map[string]*boundPod{}, byNode: map[string]*nodePods{}, max: max, log: log}
}

// Set records pod as the API server has it now: kept when it is bound to a
// node, not finished and asks for CPUs, forgotten otherwise. A pod whose
// metadata RequestOf refuses is forgotten too: its node refuses it as
// well. A pod kept for the first time is taken as bound now.
func (s *PodStore) Set(pod *corev1.Pod) { s.set(pod, false) }

// set is Set; listed says pod comes from the informer's first list, bound
// before the extender started.
func (s *PodStore) set(pod *corev1.Pod, listed bool) {
	uid := string(pod.UID)
	if uid == "" {
		return
	}
	req, err := RequestOf(pod)
	if pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed ||
		err != nil || req.QoS == alloc.BE || (req.CPUs == 0 && req.MilliCPUs == 0) {
		s.Delete(uid)
		return
	}
	print := fmt.Sprintf("%s %d %d %s %s %s %s %s", req.ID, req.CPUs, req.MilliCPUs, req.QoS, req.Bind, req.Exclusive, req.NUMA, req.TopologyPolicy)
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.byUID[uid]; ok {
		if old.node == pod.Spec.NodeName {
			if old.print != print { // resized in place; status updates change nothing
				old.req, old.print = req, print
				s.byNode[old.node].gen = changes.Add(1)
			}
			return
		}
		s.remove(old) // a node name never changes; a recreated object might
	}
	if len(s.byUID) >= s.max {
		s.full.Do(func() {
			s.log.Warn("too many bound pods to track; pods beyond it are not counted on their nodes until others finish",
				"max", strconv.Itoa(s.max))
		})
		return
	}
	p := &boundPod{uid: uid, node: pod.Spec.NodeName, req: req, print: print}
	gen := changes.Add(1)
	if !listed {
		p.bound = gen
	}
	s.byUID[uid] = p
	np := s.byNode[p.node]
	if np == nil {
		np = &nodePods{}
		s.byNode[p.node] = np
	}
	np.pods, np.gen = append(np.pods, p), gen
}

// Delete forgets the pod of UID uid.
func (s *PodStore) Delete(uid string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.byUID[uid]; ok {
		s.remove(p)
	}
}

func (s *PodStore) remove(p *boundPod) {
	delete(s.byUID, p.uid)
	np := s.byNode[p.node]
	np.pods = slices.DeleteFunc(np.pods, func(q *boundPod) bool { return q == p })
	if len(np.pods) == 0 {
		delete(s.byNode, p.node)
		return
	}
	np.gen = changes.Add(1)
}

// Len is the number of pods kept.
func (s *PodStore) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.byUID)
}

// generation names the pods bound to node and their requests now: 0 when
// there is none, else a number that changes whenever they do.
func (s *PodStore) generation(node string) uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if np := s.byNode[node]; np != nil {
		return np.gen
	}
	return 0
}

// onTheirWay returns the pods bound to node that published does not name
// (nil: those bound after change after, of changes), in the order they
// were first seen bound, as copies, and the generation they are of.
func (s *PodStore) onTheirWay(node string, published map[string]struct{}, after uint64) ([]boundPod, uint64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	np := s.byNode[node]
	if np == nil {
		return nil, 0
	}
	var out []boundPod
	for _, p := range np.pods {
		if published == nil {
			if p.bound > after {
				out = append(out, *p)
			}
		} else if _, ok := published[p.uid]; !ok {
			out = append(out, *p)
		}
	}
	return out, np.gen
}

// Watch keeps the store up to date from client's bound pods (all
// namespaces, BoundPodSelector) until ctx ends, through a client-go
// informer that keeps only what RequestOf reads of each pod. synced
// reports whether the informer has listed them all once.
func (s *PodStore) Watch(ctx context.Context, client dynamic.Interface) (synced func() bool, err error) {
	synced, err = watchTrimmed(ctx, client, PodResource, BoundPodSelector, trimPod, s.onSet, func(obj any) {
		if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if u, ok := obj.(*unstructured.Unstructured); ok {
			s.Delete(string(u.GetUID()))
		}
	})
	if err != nil {
		return nil, fmt.Errorf("watching pods: %w", err)
	}
	return synced, nil
}

func (s *PodStore) onSet(obj any, listed bool) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	var pod corev1.Pod
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &pod); err != nil {
		s.log.Warn("ignoring a pod that does not decode", "pod", u.GetNamespace()+"/"+u.GetName(), "err", err)
		s.Delete(string(u.GetUID()))
		return
	}
	s.set(&pod, listed)
}

// maxPodContainers bounds the containers of a pod trimPod keeps (the API
// server bounds them far above what a node runs).
const maxPodContainers = 256

// trimPod is the informer's transform: it keeps of a pod only what
// RequestOf and the informer's own cache read (identity, resource
// version, the labels and annotations podmeta reads, the node name, each
// container's resources, the phase and QoS class), so a cluster's pods
// cost little while cached.
func trimPod(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil // a tombstone: its object was trimmed when added
	}
	out := identityOf(u)
	keep := func(m map[string]string, names ...string) map[string]string {
		kept := map[string]string{}
		for _, n := range names {
			if v, ok := m[n]; ok {
				kept[n] = v
			}
		}
		return kept
	}
	if l := keep(u.GetLabels(), LabelQoSClass); len(l) > 0 {
		out.SetLabels(l)
	}
	if a := keep(u.GetAnnotations(), AnnotationResourceSpec, AnnotationNUMAPolicy); len(a) > 0 {
		out.SetAnnotations(a)
	}
	spec := map[string]any{}
	if n, ok, _ := unstructured.NestedString(u.Object, "spec", "nodeName"); ok {
		spec["nodeName"] = n
	}
	for _, field := range []string{"containers", "initContainers"} {
		list, ok, _ := unstructured.NestedSlice(u.Object, "spec", field)
		if !ok {
			continue
		}
		var cs []any
		for _, c := range list[:min(len(list), maxPodContainers)] {
			m, ok := c.(map[string]any)
			if !ok {
				continue
			}
			tc := map[string]any{"name": m["name"]}
			if r, ok := m["resources"]; ok {
				tc["resources"] = r
			}
			cs = append(cs, tc)
		}
		spec[field] = cs
	}
	out.Object["spec"] = spec
	status := map[string]any{}
	for _, f := range []string{"phase", "qosClass"} {
		if v, ok, _ := unstructured.NestedString(u.Object, "status", f); ok {
			status[f] = v
		}
	}
	out.Object["status"] = status
	return out, nil
}

// withBound is ns, the state node publishes under key k, with the pods
// bound to node and not yet admitted there (PodStore) placed on a copy, in
// the order they were bound, each under the node's defaults as the node
// will place it; one that no longer fits is left out (the node will
// refuse it). It is ns itself when the extender tracks no pods, the node
// does not name its pods' UIDs, or none is on its way. The result is
// cached by k and those pods.
func (e *Extender) withBound(node string, ns *nodeState, k stateKey) (*nodeState, stateKey) {
	if e.pods == nil || ns == nil || ns.err != nil || ns.st == nil || (ns.published == nil && !ns.fromNRT) {
		return ns, k
	}
	// A node judged by its NodeResourceTopology object names no pods: the
	// pods bound after the object last changed are not in it.
	var after uint64
	if ns.published == nil {
		ent, ok := e.nrt.get(node)
		if !ok {
			return ns, k
		}
		after = ent.changed
	}
	// The key of ns with the node's bound pods as they are now, built
	// without allocating: most calls find the state cached under it.
	boundKey := func(gen uint64) stateKey {
		var b [len(k) + 16 + 6 + 256]byte
		n := copy(b[:], k[:])
		binary.LittleEndian.PutUint64(b[n:], gen)
		binary.LittleEndian.PutUint64(b[n+8:], after)
		n += 16
		n += copy(b[n:], "bound\x00")
		n += copy(b[n:], node[:min(len(node), 256)])
		return sha256.Sum256(b[:n])
	}
	gen := e.pods.generation(node)
	if gen == 0 {
		return ns, k
	}
	dk := boundKey(gen)
	if d, ok := e.cache.get(dk); ok {
		if d == ns {
			return ns, k
		}
		return d, dk
	}
	coming, now := e.pods.onTheirWay(node, ns.published, after)
	if now != gen { // changed in between: key what was read
		dk = boundKey(now)
	}
	if len(coming) == 0 {
		// Every pod bound there is published: the state is the node's.
		e.cache.put(dk, ns)
		return ns, k
	}
	st := ns.st.Clone()
	placed := 0
	for _, p := range coming {
		if ns.published == nil && p.req.QoS != alloc.LSE && p.req.QoS != alloc.LSR {
			// A NodeResourceTopology object counts exclusive CPUs
			// only: a shared pod's quota is not in what it shows.
			continue
		}
		req, _, err := ns.request(p.req)
		if err != nil {
			continue // the node refuses it: it takes no CPUs there
		}
		req.ID = "bound/" + p.uid
		if _, err := st.Admit(req); err == nil {
			placed++
		}
	}
	d := *ns
	d.st, d.free, d.coming, d.before = st, st.Pools().LS.Size(), placed, ns.st
	e.cache.put(dk, &d)
	return &d, dk
}
