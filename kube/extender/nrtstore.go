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

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/kube/nrt"
)

// NRTResource is the NodeResourceTopology resource the store watches
// (the CRD of kubernetes-sigs/noderesourcetopology-api; corepin nri
// --publish-nrt, NFD's topology-updater and Koordinator publish it).
var NRTResource = schema.GroupVersionResource{Group: "topology.node.k8s.io", Version: "v1alpha2", Resource: "noderesourcetopologies"}

// NRTStore keeps, per node name, the free CPUs per NUMA node its
// NodeResourceTopology object publishes (nrt.FreeCPUs) and the allocator
// settings of its attributes (nrt.AllocatorFromAttributes: the node's
// default topology policy, and corepin's policy and options), for the
// nodes without corepin annotations. An object either refuses is logged
// and leaves its node unjudged. It keeps at most max nodes: an object for one
// more is logged and ignored until another is deleted. Its methods are
// safe for concurrent use.
type NRTStore struct {
	mu  sync.RWMutex
	m   map[string]nrtEntry
	max int
	log *slog.Logger
}

// nrtEntry is one node's free CPUs per NUMA node, its allocator settings
// and the key of the stand-in state they make.
type nrtEntry struct {
	free     []int
	settings nrt.Allocator
	key      stateKey
}

// NewNRTStore returns an empty store of at most max nodes, warning on log
// (nil: slog.Default()).
func NewNRTStore(max int, log *slog.Logger) *NRTStore {
	if log == nil {
		log = slog.Default()
	}
	return &NRTStore{m: map[string]nrtEntry{}, max: max, log: log}
}

// Set records node's zones and attributes, or forgets the node (with a
// warning) when the zones do not read as whole free CPUs per NUMA node or
// the attributes name an unknown topology policy, engine or option.
func (s *NRTStore) Set(node string, zones []nrt.Zone, attrs ...nrt.Attribute) {
	settings, err := nrt.AllocatorFromAttributes(attrs)
	if err != nil {
		s.log.Warn("NodeResourceTopology ignored: its node stays unjudged", "node", node, "err", err)
		s.Delete(node)
		return
	}
	free, err := nrt.FreeCPUs(zones)
	if err == nil {
		total := 0
		for _, f := range free {
			total += f
		}
		if total > cpuset.MaxCPU+1 {
			err = fmt.Errorf("%w: %d free CPUs in all, more than %d", nrt.ErrZones, total, cpuset.MaxCPU+1)
		}
	}
	if err != nil {
		s.log.Warn("NodeResourceTopology ignored: its node stays unjudged", "node", node, "err", err)
		s.Delete(node)
		return
	}
	h := sha256.New()
	h.Write([]byte("nrt numa-free\x00"))
	for _, f := range free {
		h.Write(strconv.AppendInt(nil, int64(f), 10))
		h.Write([]byte{','})
	}
	if settings.Policy != "" || len(settings.Options) > 0 || settings.TopologyPolicy != "" {
		// Names are checked, so none holds a NUL or a comma.
		h.Write([]byte("\x00" + settings.Policy + "\x00" + strings.Join(settings.Options, ",") + "\x00" + settings.TopologyPolicy))
	}
	var k stateKey
	h.Sum(k[:0])
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[node]; !ok && len(s.m) >= s.max {
		s.log.Warn("NodeResourceTopology ignored: the store is full, its node stays unjudged", "node", node, "max", s.max)
		return
	}
	s.m[node] = nrtEntry{free: free, settings: settings, key: k}
}

// Delete forgets node.
func (s *NRTStore) Delete(node string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, node)
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
// objects (cluster-scoped, NRTResource) until ctx ends, through a
// client-go informer that keeps only each object's name and zones. synced
// reports whether the informer has listed them all once.
func (s *NRTStore) Watch(ctx context.Context, client dynamic.Interface) (synced func() bool, err error) {
	// A plain shared informer over the dynamic client: dynamicinformer's
	// factory would link every typed informer of client-go (about 12 MB).
	// The wrapper tells the reflector whether client streams its initial
	// list in a watch (the real API server does; client-go's fakes do not).
	res := client.Resource(NRTResource)
	lw := toolscache.ToListWatcherWithWatchListSemantics(&toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return res.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return res.Watch(ctx, opts)
		},
	}, client)
	inf := toolscache.NewSharedIndexInformer(lw, &unstructured.Unstructured{}, 0, toolscache.Indexers{})
	if err := inf.SetTransform(trimNRT); err != nil {
		return nil, fmt.Errorf("setting the NodeResourceTopology transform: %w", err)
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    s.onSet,
		UpdateFunc: func(_, obj any) { s.onSet(obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				s.Delete(t.Key) // cluster-scoped: the key is the name
				return
			}
			if u, ok := obj.(*unstructured.Unstructured); ok {
				s.Delete(u.GetName())
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("watching NodeResourceTopology objects: %w", err)
	}
	go inf.RunWithContext(ctx)
	return inf.HasSynced, nil
}

func (s *NRTStore) onSet(obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	zones, attrs, err := objectOf(u)
	if err != nil {
		s.log.Warn("NodeResourceTopology ignored: its node stays unjudged", "node", u.GetName(), "err", err)
		s.Delete(u.GetName())
		return
	}
	s.Set(u.GetName(), zones, attrs...)
}

// objectOf decodes an object's zones and attributes (none when absent).
func objectOf(u *unstructured.Unstructured) ([]nrt.Zone, []nrt.Attribute, error) {
	var o struct {
		Zones []nrt.Zone `json:"zones"`
	}
	var a struct {
		Attributes []nrt.Attribute `json:"attributes"`
	}
	raw, ok := u.Object["zones"]
	if !ok || raw == nil {
		return nil, nil, fmt.Errorf("%w: no zones", nrt.ErrZones)
	}
	list, ok := raw.([]any)
	if !ok {
		return nil, nil, fmt.Errorf("%w: zones is not a list", nrt.ErrZones)
	}
	if len(list) > nrt.MaxZones {
		return nil, nil, fmt.Errorf("%w: more than %d zones", nrt.ErrZones, nrt.MaxZones)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(map[string]any{"zones": list}, &o); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", nrt.ErrZones, err)
	}
	if raw, ok := u.Object["attributes"]; ok && raw != nil {
		al, ok := raw.([]any)
		if !ok {
			return nil, nil, fmt.Errorf("%w: attributes is not a list", nrt.ErrAllocator)
		}
		if len(al) > nrt.MaxAttributes {
			return nil, nil, fmt.Errorf("%w: more than %d attributes", nrt.ErrAllocator, nrt.MaxAttributes)
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(map[string]any{"attributes": al}, &a); err != nil {
			return nil, nil, fmt.Errorf("%w: attributes: %w", nrt.ErrAllocator, err)
		}
	}
	return o.Zones, a.Attributes, nil
}

// trimNRT is the informer's transform: it keeps of an object only what
// the store and the informer's own cache need (name, resource version,
// zones and attributes; at most one zone beyond nrt.MaxZones and one
// attribute beyond nrt.MaxAttributes, enough to refuse them), so a large
// object costs little while cached.
func trimNRT(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil // a tombstone: its object was trimmed when added
	}
	out := &unstructured.Unstructured{Object: map[string]any{}}
	out.SetAPIVersion(u.GetAPIVersion())
	out.SetKind(u.GetKind())
	out.SetName(u.GetName())
	out.SetResourceVersion(u.GetResourceVersion())
	out.SetUID(u.GetUID())
	if z, ok := u.Object["zones"]; ok {
		if list, ok := z.([]any); ok && len(list) > nrt.MaxZones+1 {
			z = list[:nrt.MaxZones+1]
		}
		out.Object["zones"] = z
	}
	if a, ok := u.Object["attributes"]; ok {
		if list, ok := a.([]any); ok && len(list) > nrt.MaxAttributes+1 {
			a = list[:nrt.MaxAttributes+1]
		}
		out.Object["attributes"] = a
	}
	return out, nil
}

// errNotSynced is what /healthz answers before the store's informer has
// synced.
var errNotSynced = errors.New("waiting for the NodeResourceTopology informer to sync")
