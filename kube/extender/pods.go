package extender

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/kube/nodeview"
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
// but BE), with their allocation requests (RequestOf), for WithPods, and
// holds each in the extender's node view (nodeview.View.Hold) until it
// goes: the view judges the node with it placed first until what the node
// publishes includes it. A node whose corepin.io/allocator says its
// AnnotationAssigned names the pods it admitted (nodestate.Allocator.PodUIDs)
// includes the pods it names; a node judged by its NodeResourceTopology
// object (WithNRT), or naming no pods, includes the pods bound before its
// state last changed (those bound before the extender started are taken
// to be in it). These are the pods the scheduler bound a moment ago that
// the node's NRI plugin, koordlet or the topology exporter has not
// reported yet: without them a burst of pods would all be judged on the
// same free CPUs, and the node would refuse those past what it has, after
// the scheduler bound them. kube-scheduler counts the same pods in its own
// resource fit; this is their CPUs' placement. Its watch can lag behind a
// deletion: before a node is refused only for the CPUs of the pods counted
// there, the extender asks the API server whether they are still there
// (recheck, through the client Watch watches through).
//
// It keeps at most max pods: one more is logged once and ignored until
// others go. Its methods are safe for concurrent use.
type PodStore struct {
	mu    sync.RWMutex
	byUID map[string]*boundPod
	max   int
	full  sync.Once
	log   *slog.Logger
	// views are the node views the pods are held in (feed).
	views []*nodeview.View
	// client is what Watch watches through, asked again by recheck;
	// rechecks rations its GETs across calls.
	client   dynamic.Interface
	rechecks *rate.Limiter
}

// boundPod is a pod PodStore keeps.
type boundPod struct {
	uid, node string
	// namespace and name are where the API server has it (recheck).
	namespace, name string
	// listed says the pod comes from the informer's first list: bound
	// before the extender started.
	listed bool
	req    alloc.Request
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
	return &PodStore{byUID: map[string]*boundPod{}, max: max, log: log,
		rechecks: rate.NewLimiter(RecheckRate, RecheckRate)}
}

// feed holds the store's pods in v, now and as they change.
func (s *PodStore) feed(v *nodeview.View) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.views = append(s.views, v)
	for _, p := range s.byUID {
		v.Hold(p.uid, p.node, p.req, p.listed)
	}
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
				s.hold(old)
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
	p := &boundPod{uid: uid, node: pod.Spec.NodeName, namespace: pod.Namespace, name: pod.Name, listed: listed, req: req, print: print}
	s.byUID[uid] = p
	s.hold(p)
}

// hold holds p in the store's views. Called with s.mu held.
func (s *PodStore) hold(p *boundPod) {
	for _, v := range s.views {
		v.Hold(p.uid, p.node, p.req, p.listed)
	}
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
	for _, v := range s.views {
		v.Forget(p.uid)
	}
}

// Len is the number of pods kept.
func (s *PodStore) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.byUID)
}

// Watch keeps the store up to date from client's bound pods (all
// namespaces, BoundPodSelector) until ctx ends, through a client-go
// informer that keeps only what RequestOf reads of each pod. synced
// reports whether the informer has listed them all once.
func (s *PodStore) Watch(ctx context.Context, client dynamic.Interface) (synced func() bool, err error) {
	s.mu.Lock()
	s.client = client
	s.mu.Unlock()
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
	pod, err := podOf(u)
	if err != nil {
		s.log.Warn("ignoring a pod that does not decode", "pod", u.GetNamespace()+"/"+u.GetName(), "err", err)
		s.Delete(string(u.GetUID()))
		return
	}
	s.set(&pod, listed)
}

// podOf decodes a pod the informer or a GET handed over; pass a GET's
// through trimmed first, so that it is counted as the watch counts it.
func podOf(u *unstructured.Unstructured) (corev1.Pod, error) {
	var pod corev1.Pod
	err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &pod)
	return pod, err
}

// trimmed is u as trimPod keeps it (the informer's transform).
func trimmed(u *unstructured.Unstructured) *unstructured.Unstructured {
	t, _ := trimPod(u) // never fails on an *Unstructured
	return t.(*unstructured.Unstructured)
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
