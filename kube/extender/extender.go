package extender

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/kube/nodestate"
	"github.com/corepin/corepin/kube/nodeview"
)

// Defaults of an Extender.
const (
	// DefaultMaxBodyBytes bounds a request body: 100 nodes of 256 CPUs
	// publishing their topology take about 3 MiB.
	DefaultMaxBodyBytes = 64 << 20
	// DefaultMaxNodes bounds the nodes of one request.
	DefaultMaxNodes = 10000
	// DefaultMemoryLimit is the memory an Extender's defaults fit in:
	// the chart's limit of the extender container.
	DefaultMemoryLimit = 256 << 20
	// DefaultMaxCalls bounds the calls answered at once.
	DefaultMaxCalls = 4
	// DefaultMaxWaiting bounds the calls waiting for their turn.
	DefaultMaxWaiting = 64
)

// ErrBadRequest is wrapped by errors about a request body.
var ErrBadRequest = errors.New("bad extender request")

// Extender answers the scheduler's filter and prioritize calls. Its methods
// are safe for concurrent use.
type Extender struct {
	maxBody  int64
	maxNodes int
	memory   int64
	maxCalls int
	gate     *gate
	view     *nodeview.View
	metrics  *metrics
	nrt      *NRTStore
	pods     *PodStore
	ready    func() bool
}

// Option configures an Extender.
type Option func(*Extender)

// WithMaxBodyBytes bounds request bodies to n bytes.
func WithMaxBodyBytes(n int64) Option { return func(e *Extender) { e.maxBody = n } }

// WithMemoryLimit fits the Extender in n bytes of memory (the container's
// limit; DefaultMemoryLimit unless given): the decoded node states its
// node view keeps weigh at most an eighth of n (nodeview.WithMaxBytes),
// the bodies of the calls in flight at most a quarter (a larger call
// waits until it runs alone, and never reads more than that: the body
// cap is lowered to it). The process's Go
// soft memory limit is the caller's to set (SoftMemoryLimit).
func WithMemoryLimit(n int64) Option { return func(e *Extender) { e.memory = n } }

// SoftMemoryLimit is the Go runtime's soft memory limit
// (debug.SetMemoryLimit, GOMEMLIMIT) for a process given n bytes: 90% of
// n, leaving room for what the runtime does not count (stacks, the
// binary, fragmentation).
func SoftMemoryLimit(n int64) int64 { return n / 10 * 9 }

// WithMaxCalls bounds the calls answered at once to n; more wait.
func WithMaxCalls(n int) Option { return func(e *Extender) { e.maxCalls = n } }

// WithMaxNodes bounds the nodes of one request to n.
func WithMaxNodes(n int) Option { return func(e *Extender) { e.maxNodes = n } }

// WithNRT judges the nodes without corepin annotations by the
// NodeResourceTopology objects s keeps (NRTStore.Watch).
func WithNRT(s *NRTStore) Option { return func(e *Extender) { e.nrt = s } }

// WithPods judges each node with the pods s keeps bound to it and not yet
// in what it publishes placed first (nodeview.View.Hold): for a node
// naming the pods it admitted, those it does not name; for one judged by
// its NodeResourceTopology object, or naming no pods, those bound after
// its state last changed (PodStore.Watch). A node /filter would refuse
// only for the CPUs of those pods is judged again once the API server has
// been asked about them and one is gone (see MaxRecheckPods).
func WithPods(s *PodStore) Option { return func(e *Extender) { e.pods = s } }

// WithReady makes GET /healthz answer 503 while ready reports false (the
// NodeResourceTopology informer has not synced yet).
func WithReady(ready func() bool) Option { return func(e *Extender) { e.ready = ready } }

// New returns an Extender.
func New(opts ...Option) *Extender {
	e := &Extender{maxBody: DefaultMaxBodyBytes, maxNodes: DefaultMaxNodes, memory: DefaultMemoryLimit, maxCalls: DefaultMaxCalls,
		metrics: newMetrics()}
	for _, o := range opts {
		o(e)
	}
	inFlight := e.memory / 4
	e.maxBody = min(e.maxBody, inFlight)
	e.gate = newGate(inFlight, max(e.maxCalls, 1), DefaultMaxWaiting)
	e.view = nodeview.New(nodeview.WithMaxBytes(max(e.memory/8, 1)))
	if e.nrt != nil {
		e.nrt.feed(e.view)
	}
	if e.pods != nil {
		e.pods.feed(e.view)
		pods := e.pods
		e.metrics.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "corepin_extender_bound_pods",
			Help: "Pods bound to nodes and asking for CPUs that --track-pods keeps (admitted by their nodes or not yet).",
		}, func() float64 { return float64(pods.Len()) }))
	}
	return e
}

// Handler serves POST /filter and POST /prioritize (the verbs of the
// shipped scheduler configuration), GET /healthz (503 until WithReady's
// function reports true) and GET /metrics
// (Prometheus: call durations and counts by verb, filtered nodes by
// result).
func (e *Extender) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /filter", e.metrics.timed("filter", e.verb(true)))
	mux.HandleFunc("POST /prioritize", e.metrics.timed("prioritize", e.verb(false)))
	e.ops(mux)
	return mux
}

// OpsHandler serves only GET /healthz and GET /metrics, for a listener of
// their own that probes and Prometheus can reach while the scheduler's
// verbs stay on loopback.
func (e *Extender) OpsHandler() http.Handler {
	mux := http.NewServeMux()
	e.ops(mux)
	return mux
}

func (e *Extender) ops(mux *http.ServeMux) {
	mux.Handle("GET /metrics", e.metrics.handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if e.ready != nil && !e.ready() {
			http.Error(w, errNotSynced.Error(), http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok\n")
	})
}

// verb answers a call: filter (the filter answer) or not (the prioritize
// answer). It waits its turn at the gate, reads the body as a stream
// (readStream), judges each node as it is read, and answers once the
// whole body is read and valid, else 4xx; a filter call keeps only the
// items of the nodes it keeps, as sent, and writes them straight out.
func (e *Extender) verb(filter bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		weight := e.maxBody
		if n := r.ContentLength; n > 0 && n < weight {
			weight = n
		}
		release, err := e.gate.acquire(r.Context(), weight)
		if err != nil {
			w.Header().Set("Retry-After", "1")
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		defer release()
		if weight >= bigCall {
			// Give the memory of a big call back to the system
			// (issue 17: a 64 MiB call left 1.9 GB held).
			defer debug.FreeOSMemory()
		}
		rc := newRecheck(r.Context())
		defer rc.done()
		var (
			req          alloc.Request
			reqErr       error
			key          nodeview.Key
			kept         [][]byte
			failed       = extenderv1.FailedNodesMap{}
			unresolvable = extenderv1.FailedNodesMap{}
			scores       extenderv1.HostPriorityList
			names        = map[string]struct{}{}
		)
		err = readStream(http.MaxBytesReader(w, r.Body, e.maxBody), e.maxNodes, func(raw []byte) error {
			pod := new(corev1.Pod)
			if err := json.Unmarshal(raw, pod); err != nil {
				return fmt.Errorf("%w: parsing Pod: %w", ErrBadRequest, err)
			}
			req, reqErr = RequestOf(pod)
			key = e.view.Key(req)
			return nil
		}, func(raw []byte) error {
			var name string
			if n, ok := readNode(raw); ok {
				name = n.name
				if err := once(names, name); err != nil {
					return err
				}
				e.setRawNode(&n)
			} else {
				var node corev1.Node
				if err := json.Unmarshal(raw, &node); err != nil {
					return fmt.Errorf("%w: parsing Nodes: %w", ErrBadRequest, err)
				}
				name = node.Name
				if err := once(names, name); err != nil {
					return err
				}
				e.setNode(&node)
			}
			v := e.view.Judge(name, req, reqErr, key)
			if filter {
				v = e.confirm(rc, name, req, reqErr, key, v)
			}
			switch {
			case !filter:
				scores = append(scores, extenderv1.HostPriority{Host: name, Score: v.Score})
			case v.OK:
				kept = append(kept, bytes.Clone(raw))
			case v.Unresolvable:
				unresolvable[name] = v.Reason
			default:
				failed[name] = v.Reason
			}
			return nil
		})
		if err != nil {
			httpError(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if !filter {
			if scores == nil {
				scores = extenderv1.HostPriorityList{}
			}
			json.NewEncoder(w).Encode(scores) // a write error means the scheduler went away
			return
		}
		e.metrics.filtered(len(kept), len(failed), len(unresolvable))
		writeFilterAnswer(w, kept, failed, unresolvable)
	}
}

// bigCall is the body size from which a call gives its memory back to the
// system when it ends.
const bigCall = 8 << 20

// once records name in names, or refuses a second node of that name: the
// answer could not tell them apart (a FailedNodesMap holds one reason
// per name), so one would vanish from it.
func once(names map[string]struct{}, name string) error {
	if _, ok := names[name]; ok {
		return fmt.Errorf("%w: node %q given twice", ErrBadRequest, short(name))
	}
	names[name] = struct{}{}
	return nil
}

// writeFilterAnswer writes the JSON of an ExtenderFilterResult whose Nodes
// are the kept items as the scheduler sent them.
func writeFilterAnswer(w io.Writer, kept [][]byte, failed, unresolvable extenderv1.FailedNodesMap) {
	bw := bufio.NewWriterSize(w, 64<<10)
	bw.WriteString(`{"Nodes":{"metadata":{},"items":[`)
	for i, item := range kept {
		if i > 0 {
			bw.WriteByte(',')
		}
		bw.Write(item)
	}
	fj, err := json.Marshal(failed)
	if err != nil {
		fj = []byte("{}") // not reached: a map of strings always encodes
	}
	uj, err := json.Marshal(unresolvable)
	if err != nil {
		uj = []byte("{}")
	}
	bw.WriteString(`]},"NodeNames":null,"FailedNodes":`)
	bw.Write(fj)
	bw.WriteString(`,"FailedAndUnresolvableNodes":`)
	bw.Write(uj)
	bw.WriteString(`,"Error":""}` + "\n")
	bw.Flush() // a write error means the scheduler went away
}

func httpError(w http.ResponseWriter, err error) {
	code := http.StatusBadRequest
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		code = http.StatusRequestEntityTooLarge
	}
	http.Error(w, err.Error(), code)
}

// DecodeArgs decodes one ExtenderArgs JSON document as the handler reads
// it (readStream): exactly one object, no keys beyond Pod, Nodes and
// NodeNames, none given twice, a pod, and a node list of at most maxNodes
// nodes, no two of one name (NodeNames alone means nodeCacheCapable,
// which corepin does not support). The objects are decoded leniently,
// because a newer API server adds fields to Pod and Node that this build
// does not know. Errors wrap ErrBadRequest.
func DecodeArgs(data []byte, maxNodes int) (*extenderv1.ExtenderArgs, error) {
	args := &extenderv1.ExtenderArgs{Pod: new(corev1.Pod), Nodes: &corev1.NodeList{}}
	names := map[string]struct{}{}
	err := readStream(bytes.NewReader(data), maxNodes, func(raw []byte) error {
		if err := json.Unmarshal(raw, args.Pod); err != nil {
			return fmt.Errorf("%w: parsing Pod: %w", ErrBadRequest, err)
		}
		return nil
	}, func(raw []byte) error {
		var n corev1.Node
		if err := json.Unmarshal(raw, &n); err != nil {
			return fmt.Errorf("%w: parsing Nodes: %w", ErrBadRequest, err)
		}
		if err := once(names, n.Name); err != nil {
			return err
		}
		args.Nodes.Items = append(args.Nodes.Items, n)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return args, nil
}

// ComingSuffix ends the reason of a refusal that only pods bound to the
// node and not yet admitted there cause (WithPods): nodestate.ComingSuffix.
const ComingSuffix = nodestate.ComingSuffix

// Filter keeps the nodes where the pod's CPUs can be placed and fails the
// others with a reason worded like the scheduler's own, identical across
// nodes for the same cause so that the scheduler can count them.
func (e *Extender) Filter(args *extenderv1.ExtenderArgs) *extenderv1.ExtenderFilterResult {
	req, reqErr := RequestOf(args.Pod)
	key := e.view.Key(req)
	res := &extenderv1.ExtenderFilterResult{Nodes: &corev1.NodeList{Items: []corev1.Node{}},
		FailedNodes: extenderv1.FailedNodesMap{}, FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{}}
	rc := newRecheck(context.Background())
	defer rc.done()
	for i := range args.Nodes.Items {
		n := &args.Nodes.Items[i]
		e.setNode(n)
		v := e.confirm(rc, n.Name, req, reqErr, key, e.view.Judge(n.Name, req, reqErr, key))
		switch {
		case v.OK:
			res.Nodes.Items = append(res.Nodes.Items, *n)
		case v.Unresolvable:
			res.FailedAndUnresolvableNodes[n.Name] = v.Reason
		default:
			res.FailedNodes[n.Name] = v.Reason
		}
	}
	e.metrics.filtered(len(res.Nodes.Items), len(res.FailedNodes), len(res.FailedAndUnresolvableNodes))
	return res
}

// Prioritize scores each node 0 to MaxExtenderPriority by the placement
// the pod would get there; a node that cannot take it scores 0.
func (e *Extender) Prioritize(args *extenderv1.ExtenderArgs) *extenderv1.HostPriorityList {
	req, reqErr := RequestOf(args.Pod)
	key := e.view.Key(req)
	out := make(extenderv1.HostPriorityList, 0, len(args.Nodes.Items))
	for i := range args.Nodes.Items {
		n := &args.Nodes.Items[i]
		e.setNode(n)
		v := e.view.Judge(n.Name, req, reqErr, key)
		out = append(out, extenderv1.HostPriority{Host: n.Name, Score: v.Score})
	}
	return &out
}

// Reason words a refusal the way the scheduler's own reasons read ("no
// NUMA node with 9 free CPUs"), with the same text on every node refused
// for the same cause (nodestate.Reason).
func Reason(req alloc.Request, err error) string { return nodestate.Reason(req, err) }
