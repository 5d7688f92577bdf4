package extender

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/kube/nodestate"
	"github.com/corepin/corepin/kube/nodeview"
)

// NRTResource and NRTResourceV1alpha1 are the NodeResourceTopology
// resources the store reads (nodestate.NRTResource,
// nodestate.NRTResourceV1alpha1).
var (
	NRTResource         = nodestate.NRTResource
	NRTResourceV1alpha1 = nodestate.NRTResourceV1alpha1
)

// NRTStore keeps, per node name, what its NodeResourceTopology object
// publishes for judging it: Koordinator's CPU detail (nodestate.ParseKoord: the
// whole machine, reserved and held CPUs) when the object carries
// nodestate.AnnotationKoordCPUTopology, else the free CPUs per NUMA node of its
// zones (nodestate.FreeCPUs); and the allocator settings of its attributes
// (nodestate.AllocatorFromAttributes) with, absent the topologyManagerPolicy
// attribute, the default topology policy of its topologyPolicies
// (nodestate.TopologyPolicyOfNRT); on a Koordinator object the engine and
// options are the kubelet's that Koordinator reports, not corepin's
// attributes. An object that does not read (its zones, settings or
// Koordinator annotations) is logged and fails its node, as a malformed
// annotation does: the node takes no pod that needs aligned CPUs
// (nodestate.Prejudge), and the error, naming what does not read, is the
// reason. It keeps at most max nodes: an object for one more is logged
// and ignored until another is deleted. Each object it keeps is handed to
// the extender's node view (nodeview.View.SetNRTFields), which judges the
// node by it. Its methods are safe for concurrent use.
type NRTStore struct {
	mu  sync.RWMutex
	m   map[string]nrtEntry
	max int
	log *slog.Logger
	// views are the node views the objects are handed to (feed).
	views []*nodeview.View
}

// nrtEntry is one node's free CPUs per NUMA node or Koordinator state (or
// the error reading the object), its allocator settings and the key of
// the state they make.
type nrtEntry struct {
	free     []int
	koord    *nodestate.Koord
	readErr  error
	settings alloc.NodeSettings
	// key names what the object publishes; fields are what was read of
	// it and fieldsErr why they do not read (nodestate.FieldsOf), as
	// handed to the views.
	key       [sha256.Size]byte
	fields    nodestate.NRTFields
	fieldsErr error
}

// NewNRTStore returns an empty store of at most max nodes, warning on log
// (nil: slog.Default()).
func NewNRTStore(max int, log *slog.Logger) *NRTStore {
	if log == nil {
		log = slog.Default()
	}
	return &NRTStore{m: map[string]nrtEntry{}, max: max, log: log}
}

// Set records node's zones and attributes, or fails the node (with a
// warning) when the zones do not read as whole free CPUs per NUMA node or
// the attributes name an unknown topology policy, engine or option.
func (s *NRTStore) Set(node string, zones []nodestate.Zone, attrs ...nodestate.Attribute) {
	s.set(node, nodestate.NRTFields{Zones: zones, Attrs: attrs})
}

// set records what node's object o publishes (see NRTStore).
func (s *NRTStore) set(node string, o nodestate.NRTFields) {
	n, koordErr, err := o.Read()
	if err != nil {
		s.failed(node, o, nil, err)
		return
	}
	settings := n.Settings
	h := sha256.New()
	ent := nrtEntry{settings: settings, koord: n.Koord, readErr: koordErr, free: n.Free, fields: o}
	if o.KoordAnn != nil {
		h.Write([]byte("nrt koordinator\x00"))
		for _, name := range nodestate.KoordAnnotations {
			v, ok := o.KoordAnn[name]
			if !ok {
				h.Write([]byte("-\x00"))
				continue
			}
			// Length first: the values are not delimited.
			h.Write([]byte("+" + strconv.Itoa(len(v)) + "\x00" + v))
		}
	} else {
		h.Write([]byte("nrt numa-free\x00"))
		for _, f := range n.Free {
			h.Write(strconv.AppendInt(nil, int64(f), 10))
			h.Write([]byte{','})
		}
	}
	if settings.Policy != "" || len(settings.Options) > 0 || settings.TopologyPolicy != "" {
		// Names are checked, so none holds a NUL or a comma.
		h.Write([]byte("\x00" + string(settings.Policy) + "\x00" + strings.Join(settings.Options, ",") + "\x00" + string(settings.TopologyPolicy)))
	}
	h.Sum(ent.key[:0])
	s.put(node, ent)
}

// failed records that node's object (fields o, or fieldsErr why they do
// not read) does not read (err): the node takes no pod that needs aligned
// CPUs until the object reads again.
func (s *NRTStore) failed(node string, o nodestate.NRTFields, fieldsErr, err error) {
	s.log.Warn("NodeResourceTopology unreadable: its node takes no pod that needs aligned CPUs", "node", node, "err", err)
	s.put(node, nrtEntry{readErr: err, key: sha256.Sum256([]byte("nrt unreadable\x00" + err.Error())), fields: o, fieldsErr: fieldsErr})
}

// put records ent as node's entry, and hands it to the views.
func (s *NRTStore) put(node string, ent nrtEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[node]; !ok && len(s.m) >= s.max {
		s.log.Warn("NodeResourceTopology ignored: the store is full, its node stays unjudged", "node", node, "max", s.max)
		return
	}
	s.m[node] = ent
	for _, v := range s.views {
		ent.handTo(v, node)
	}
}

// handTo hands node's entry to the view v: its key names its version.
func (ent nrtEntry) handTo(v *nodeview.View, node string) {
	v.SetNRTFields(node, string(ent.key[:]), ent.fields, ent.fieldsErr)
}

// feed hands the store's objects to v, now and as they change.
func (s *NRTStore) feed(v *nodeview.View) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.views = append(s.views, v)
	for node, ent := range s.m {
		ent.handTo(v, node)
	}
}

// Delete forgets node.
func (s *NRTStore) Delete(node string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, node)
	for _, v := range s.views {
		v.DeleteNRT(node)
	}
}

// Len is the number of nodes known.
func (s *NRTStore) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.m)
}

func (s *NRTStore) get(node string) (nrtEntry, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok := s.m[node]
	return e, ok
}

// Watch keeps the store up to date from client's NodeResourceTopology
// objects (cluster-scoped) of resource res (NRTResource or
// NRTResourceV1alpha1: NRTResourceOf picks the one served) until ctx ends,
// through a client-go informer that keeps only what the store reads of
// each object. synced reports whether the informer has listed them all
// once.
func (s *NRTStore) Watch(ctx context.Context, client dynamic.Interface, res schema.GroupVersionResource) (synced func() bool, err error) {
	synced, err = watchTrimmed(ctx, client, res, "", trimNRT, func(obj any, _ bool) { s.onSet(obj) }, func(obj any) {
		if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			s.Delete(t.Key) // cluster-scoped: the key is the name
			return
		}
		if u, ok := obj.(*unstructured.Unstructured); ok {
			s.Delete(u.GetName())
		}
	})
	if err != nil {
		return nil, fmt.Errorf("watching NodeResourceTopology objects: %w", err)
	}
	return synced, nil
}

// watchTrimmed runs, until ctx ends, a client-go informer over client's
// objects of resource res (all namespaces; fieldSelector, when not empty,
// chooses which) that keeps each object as transform trims it, and calls
// set on each addition and update, del on each deletion (with the object
// or a tombstone); set's initial is true for the objects of the first
// list. synced reports whether it has listed them all once.
func watchTrimmed(ctx context.Context, client dynamic.Interface, res schema.GroupVersionResource, fieldSelector string,
	transform toolscache.TransformFunc, set func(obj any, initial bool), del func(obj any)) (synced func() bool, err error) {
	// A plain shared informer over the dynamic client: dynamicinformer's
	// factory would link every typed informer of client-go (about 12 MB).
	// The wrapper tells the reflector whether client streams its initial
	// list in a watch (the real API server does; client-go's fakes do not).
	ri := client.Resource(res)
	lw := toolscache.ToListWatcherWithWatchListSemantics(&toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = fieldSelector
			return ri.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = fieldSelector
			return ri.Watch(ctx, opts)
		},
	}, client)
	inf := toolscache.NewSharedIndexInformer(lw, &unstructured.Unstructured{}, 0, toolscache.Indexers{})
	if err := inf.SetTransform(transform); err != nil {
		return nil, fmt.Errorf("setting the informer's transform: %w", err)
	}
	// The registration's HasSynced, not the informer's: the informer is
	// synced once its own store holds the first list, possibly before this
	// handler has put those objects in ours.
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, obj any) { set(obj, false) },
		DeleteFunc: del,
	})
	if err != nil {
		return nil, err
	}
	go inf.RunWithContext(ctx)
	return reg.HasSynced, nil
}

// Discoverer answers which resources an API group version serves
// (nodestate.Discoverer).
type Discoverer = nodestate.Discoverer

// ErrNoNRT means the API server serves no NodeResourceTopology version the
// store reads (nodestate.ErrNoNRT).
var ErrNoNRT = nodestate.ErrNoNRT

// NRTResourceOf asks d which NodeResourceTopology version the API server
// serves (nodestate.NRTResourceOf).
func NRTResourceOf(d Discoverer) (schema.GroupVersionResource, error) {
	return nodestate.NRTResourceOf(d)
}

func (s *NRTStore) onSet(obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	o, err := nodestate.FieldsOf(u)
	if err != nil {
		s.failed(u.GetName(), o, err, err)
		return
	}
	s.set(u.GetName(), o)
}

// identityOf is a new object with u's type, name, namespace, resource
// version and UID alone: what an informer's cache needs of it.
func identityOf(u *unstructured.Unstructured) *unstructured.Unstructured {
	out := &unstructured.Unstructured{Object: map[string]any{}}
	out.SetAPIVersion(u.GetAPIVersion())
	out.SetKind(u.GetKind())
	out.SetName(u.GetName())
	out.SetNamespace(u.GetNamespace())
	out.SetResourceVersion(u.GetResourceVersion())
	out.SetUID(u.GetUID())
	return out
}

// trimNRT is the informer's transform: it keeps of an object only what
// the store and the informer's own cache need (name, resource version,
// zones, attributes, topologyPolicies and Koordinator's annotations; at
// most one zone beyond nodestate.MaxZones and one attribute or topology policy
// beyond nodestate.MaxAttributes, enough to refuse them; the API server bounds
// the annotations), so a large object costs little while cached.
func trimNRT(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil // a tombstone: its object was trimmed when added
	}
	out := identityOf(u)
	for _, f := range []struct {
		field string
		max   int
	}{{"zones", nodestate.MaxZones}, {"attributes", nodestate.MaxAttributes}, {"topologyPolicies", nodestate.MaxAttributes}} {
		v, ok := u.Object[f.field]
		if !ok {
			continue
		}
		if list, ok := v.([]any); ok && len(list) > f.max+1 {
			v = list[:f.max+1]
		}
		out.Object[f.field] = v
	}
	if ann := u.GetAnnotations(); len(ann) > 0 {
		kept := map[string]string{}
		for _, name := range nodestate.KoordAnnotations {
			if v, ok := ann[name]; ok {
				kept[name] = v
			}
		}
		if len(kept) > 0 {
			out.SetAnnotations(kept)
		}
	}
	return out, nil
}

// errNotSynced is what /healthz answers before the store's informer has
// synced.
var errNotSynced = errors.New("waiting for the NodeResourceTopology informer to sync")
