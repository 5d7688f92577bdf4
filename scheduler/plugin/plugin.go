package plugin

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/kube/nodestate"
	"github.com/corepin/corepin/kube/nodeview"
	"github.com/corepin/corepin/kube/podreq"
)

// Name is the plugin's name in a scheduler profile.
const Name = "Corepin"

// stateKey is the plugin's key in a scheduling cycle's CycleState.
const stateKey fwk.StateKey = Name

// Plugin is corepin's kube-scheduler framework plugin, an adapter from the
// framework's calls to a node view (kube/nodeview): PreFilter reads the
// pod's CPU wish once (kube/podreq, through kube/podmeta as the extender
// and the NRI plugin read it) and, when that spares the scheduler work,
// names the nodes whose counts do not rule the pod out (narrow), Filter
// keeps the nodes the view says can place it (refusing with the view's
// reasons, the extender's), PostFilter says why the nodes PreFilter left
// out refuse a pod that fits none, Score rates
// the placement Filter found (skipped when every node kept scores the
// same: PreScore), Reserve places the pod on the node's state
// in the view at once and Unreserve releases it, PostBind notes the
// binding.
type Plugin struct {
	view *nodeview.View
	// last is the cycle PreFilter wrote last, with the CycleState it
	// wrote it in: the scheduler runs one scheduling cycle at a time, so
	// Filter and Score find it without reading the state (cycleOf).
	last atomic.Pointer[cycle]
	// nrt is the NodeResourceTopology resource the plugin reads, as the
	// scheduler names an event's resource ("" when none is served).
	nrt fwk.EventResource
	// narrowing is PreFilter's, to name the nodes a pod may go to.
	narrowing narrowing
}

var (
	_ fwk.PreFilterPlugin  = (*Plugin)(nil)
	_ fwk.FilterPlugin     = (*Plugin)(nil)
	_ fwk.PostFilterPlugin = (*Plugin)(nil)
	_ fwk.PreScorePlugin   = (*Plugin)(nil)
	_ fwk.ScorePlugin      = (*Plugin)(nil)
	_ fwk.ReservePlugin    = (*Plugin)(nil)
	_ fwk.PostBindPlugin   = (*Plugin)(nil)
)

// New is the plugin's factory (app.WithPlugin(Name, New)): it keeps the
// node view up to date from the handle's Node and Pod informers and, when the
// API server serves them, the NodeResourceTopology objects (watchNRT).
func New(ctx context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	p := NewWithView(nodeview.New())
	if s, ok := h.(interface{ PercentageOfNodesToScore() *int32 }); ok {
		p.narrowing.pct = s.PercentageOfNodesToScore()
	}
	f := h.SharedInformerFactory()
	reg, err := f.Core().V1().Nodes().Informer().AddEventHandler(p.NodeHandler())
	if err != nil {
		return nil, fmt.Errorf("watching nodes: %w", err)
	}
	go p.logDecoded(ctx, reg)
	if _, err := f.Core().V1().Pods().Informer().AddEventHandler(p.PodHandler()); err != nil {
		return nil, fmt.Errorf("watching pods: %w", err)
	}
	if cfg := h.KubeConfig(); cfg != nil {
		if err := p.watchNRT(ctx, cfg); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// logDecoded says once when the plugin's view holds every node the
// scheduler started with (its Node handler saw the informer's first list,
// each node decoded), and how long that took: until then a node's state
// may still be decoded in Filter, at a pod's expense.
func (p *Plugin) logDecoded(ctx context.Context, reg toolscache.ResourceEventHandlerRegistration) {
	begin := time.Now()
	if !toolscache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		return
	}
	n := p.view.Nodes()
	klog.FromContext(ctx).Info("corepin: node states decoded", "nodes", n, "seconds", time.Since(begin).Seconds())
}

// watchNRT keeps the view's NodeResourceTopology objects (View.SetNRT)
// from the version the API server serves (nodestate.NRTResourceOf) until
// ctx ends; none served is logged, not an error: the nodes publishing
// corepin's annotations are judged all the same.
func (p *Plugin) watchNRT(ctx context.Context, cfg *rest.Config) error {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("watching NodeResourceTopology objects: %w", err)
	}
	res, err := nodestate.NRTResourceOf(dc)
	if errors.Is(err, nodestate.ErrNoNRT) {
		klog.FromContext(ctx).Info("corepin: not reading NodeResourceTopology objects", "reason", err.Error())
		return nil
	}
	if err != nil {
		return fmt.Errorf("watching NodeResourceTopology objects: %w", err)
	}
	p.nrt = fwk.EventResource(res.Resource + "." + res.Version + "." + res.Group)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("watching NodeResourceTopology objects: %w", err)
	}
	f := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	if _, err := f.ForResource(res).Informer().AddEventHandler(p.NRTHandler()); err != nil {
		return fmt.Errorf("watching NodeResourceTopology objects: %w", err)
	}
	f.Start(ctx.Done())
	// Listed before the plugin is handed over: the scheduler's readiness
	// (its /readyz sched-handler-sync check) follows, and no pod is judged
	// on a node whose published topology has not been read yet.
	wctx, cancel := context.WithTimeout(ctx, nrtSyncLimit)
	defer cancel()
	for r, ok := range f.WaitForCacheSync(wctx.Done()) {
		if !ok {
			return fmt.Errorf("the NodeResourceTopology objects (%s) were not listed within %s: "+
				"check that the API server answers and that the scheduler's role may list and watch them", r.String(), nrtSyncLimit)
		}
	}
	return nil
}

// nrtSyncLimit bounds the wait for the first list of the
// NodeResourceTopology objects when the plugin starts.
const nrtSyncLimit = time.Minute

// NRTHandler keeps the view's NodeResourceTopology objects.
func (p *Plugin) NRTHandler() toolscache.ResourceEventHandler {
	set := func(obj any) {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			p.view.SetNRT(u)
		}
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, obj any) { set(obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				p.view.DeleteNRT(t.Key) // cluster-scoped: the key is the name
				return
			}
			if u, ok := obj.(*unstructured.Unstructured); ok {
				p.view.DeleteNRT(u.GetName())
			}
		},
	}
}

// NewWithView is a Plugin judging through v.
func NewWithView(v *nodeview.View) *Plugin { return &Plugin{view: v} }

// NodeHandler keeps the view's node states: each change of a node's
// corepin annotations is decoded once (View.SetNode).
func (p *Plugin) NodeHandler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { p.setNode(obj) },
		UpdateFunc: func(_, obj any) { p.setNode(obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if n, ok := obj.(*corev1.Node); ok {
				p.view.DeleteNode(n.Name)
			}
		},
	}
}

func (p *Plugin) setNode(obj any) {
	if n, ok := obj.(*corev1.Node); ok {
		p.view.SetNode(n)
	}
}

// PodHandler releases the reservation of a pod deleted, or finished,
// before its node published it.
func (p *Plugin) PodHandler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) {
			if pod, ok := obj.(*corev1.Pod); ok && (pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed) {
				p.view.Forget(string(pod.UID))
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				p.view.Forget(string(pod.UID))
			}
		},
	}
}

// Name is Name.
func (p *Plugin) Name() string { return Name }

// cycle is what the plugin keeps in a scheduling cycle: the pod's request
// (or why it does not read) and its key among the verdicts each node
// entry in the view keeps, where Score finds Filter's verdict.
type cycle struct {
	req alloc.Request
	err error
	key nodeview.Key
	// leftOut is the number of nodes PreFilter left out (narrow), example
	// the first of them (PostFilter).
	leftOut int
	example *corev1.Node
	// state is the CycleState the cycle was written in (Plugin.last).
	state fwk.CycleState
	// score is the score of every node Filter kept in this cycle so
	// far, noScore before the first; scores says they differ. When
	// they do not, PreScore skips Score (PreScore).
	score  atomic.Int64
	scores atomic.Bool
}

// noScore is cycle.score before Filter kept a node.
const noScore = -1

// kept notes that Filter kept a node whose verdict scores score.
func (c *cycle) kept(score int64) {
	if !c.score.CompareAndSwap(noScore, score) && c.score.Load() != score {
		c.scores.Store(true)
	}
}

// Clone shares the cycle: it never changes.
func (c *cycle) Clone() fwk.StateData { return c }

// cycleOf is the cycle PreFilter wrote in state: the last one written
// when state is the one it was written in, else read from state (a copy
// of it: the scheduler's runs with nominated pods added, preemption's).
func (p *Plugin) cycleOf(state fwk.CycleState) (*cycle, error) {
	if c := p.last.Load(); c != nil && c.state == state {
		return c, nil
	}
	d, err := state.Read(stateKey)
	if err != nil {
		return nil, fmt.Errorf("reading the pod's corepin request: %w", err)
	}
	c, ok := d.(*cycle)
	if !ok {
		return nil, fmt.Errorf("the cycle's %s state is a %T", Name, d)
	}
	return c, nil
}

// PreFilter reads the pod's request once for the cycle and names the
// nodes that may take it when that spares the scheduler visits (narrow).
func (p *Plugin) PreFilter(_ context.Context, state fwk.CycleState, pod *corev1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	req, err := podreq.Of(pod)
	c := &cycle{req: req, err: err, key: p.view.Key(req), state: state}
	c.score.Store(noScore)
	state.Write(stateKey, c)
	p.last.Store(c)
	return p.narrow(c, nodes), nil
}

// PreFilterExtensions is nil: the plugin judges CPUs the scheduler's own
// pod accounting does not see.
func (p *Plugin) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter keeps a node that publishes no corepin state, or whose state
// places the pod; else it fails it with the extender's reason,
// UnschedulableAndUnresolvable when preempting the node's pods would not
// help.
func (p *Plugin) Filter(_ context.Context, state fwk.CycleState, _ *corev1.Pod, ni fwk.NodeInfo) *fwk.Status {
	c, err := p.cycleOf(state)
	if err != nil {
		return fwk.AsStatus(err)
	}
	// A node the scheduler's snapshot has before this plugin's informer
	// handler ran is decoded now, once.
	v := p.view.JudgeNode(ni.Node(), c.req, c.err, c.key)
	switch {
	case v.OK:
		c.kept(v.Score)
		return nil
	case v.Unresolvable:
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, v.Reason)
	}
	return fwk.NewStatus(fwk.Unschedulable, v.Reason)
}

// PreScore skips Score when every node Filter kept in this cycle scored
// the same (an LS or BE pod on nodes that all place it in their shared
// pool, or on nodes corepin does not judge): a score equal on every node
// changes no node's rank, and the nodes' Score calls cost what Filter's
// did.
func (p *Plugin) PreScore(_ context.Context, state fwk.CycleState, _ *corev1.Pod, _ []fwk.NodeInfo) *fwk.Status {
	c, err := p.cycleOf(state)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if c.score.Load() != noScore && !c.scores.Load() {
		return fwk.NewStatus(fwk.Skip)
	}
	return nil
}

// scoreScale turns nodestate.Score's range into the framework's.
const scoreScale = fwk.MaxNodeScore / nodestate.MaxScore

// Score rates the placement Filter found on the node in this cycle (kept
// on the node's entry, the node's state unchanged since), else places the
// pod again; a node that
// publishes no corepin state scores 0, as with the extender.
func (p *Plugin) Score(_ context.Context, state fwk.CycleState, _ *corev1.Pod, ni fwk.NodeInfo) (int64, *fwk.Status) {
	c, err := p.cycleOf(state)
	if err != nil {
		return 0, fwk.AsStatus(err)
	}
	// Filter's verdict, kept on the node's entry; judged again only when
	// the node's state changed since.
	v := p.view.JudgeSeen(ni.Node(), c.req, c.err, c.key)
	return v.Score * scoreScale, nil
}

// ScoreExtensions is nil: scores are in the framework's range already.
func (p *Plugin) ScoreExtensions() fwk.ScoreExtensions { return nil }

// Reserve places the pod on the node's state in the view at once
// (View.Reserve), so the next pod of a burst is judged on what is left.
func (p *Plugin) Reserve(_ context.Context, state fwk.CycleState, pod *corev1.Pod, nodeName string) *fwk.Status {
	c, err := p.cycleOf(state)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if c.err != nil {
		return nil // Filter let it through: not a corepin node
	}
	if err := p.view.Reserve(string(pod.UID), nodeName, c.req); err != nil {
		return fwk.NewStatus(fwk.Unschedulable, nodestate.Reason(c.req, err))
	}
	return nil
}

// Unreserve releases the pod's reservation.
func (p *Plugin) Unreserve(_ context.Context, _ fwk.CycleState, pod *corev1.Pod, _ string) {
	p.view.Forget(string(pod.UID))
}

// PostBind notes that the pod is bound (View.Bound).
func (p *Plugin) PostBind(_ context.Context, _ fwk.CycleState, pod *corev1.Pod, _ string) {
	p.view.Bound(string(pod.UID))
}
