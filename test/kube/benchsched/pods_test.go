package benchsched

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/kube/nodestate"
	"github.com/corepin/corepin/kube/podmeta"
	"github.com/corepin/corepin/kube/podreq"
)

// The CPU wishes of the burst, drawn per pod.
const (
	kindLSE    = "LSE whole cores"  // Guaranteed, whole CPUs, FullPCPUs
	kindSingle = "single-numa-node" // Guaranteed, whole CPUs, corepin.io/numa-policy
	kindLS     = "LS"               // Burstable
	kindBE     = "BE"               // BestEffort
)

// makePods draws the burst's m pods (rng): 35% LSE whole cores (2, 4 or
// 8 CPUs in whole physical cores), 35% single-numa-node (2 to 12 CPUs),
// 20% LS (0.5 to 2 CPUs requested), 10% BE, for scheduler schedulerName.
func makePods(m int, rng *rand.Rand, ns, schedulerName string) []*corev1.Pod {
	pods := make([]*corev1.Pod, 0, m)
	for i := range m {
		name := fmt.Sprintf("p-%05d", i)
		ann := map[string]string{}
		var rl, lim corev1.ResourceList
		switch d := rng.IntN(100); {
		case d < 35:
			cpus := []int{2, 4, 8}[rng.IntN(3)]
			ann[podmeta.AnnotationResourceSpec] = `{"preferredCPUBindPolicy":"FullPCPUs"}`
			rl = cpuMem(strconv.Itoa(cpus))
			lim = rl
		case d < 70:
			ann[podmeta.AnnotationNUMAPolicy] = string(alloc.TopologySingleNUMANode)
			rl = cpuMem(strconv.Itoa(2 + rng.IntN(11)))
			lim = rl
		case d < 90:
			rl = cpuMem(fmt.Sprintf("%dm", 500*(1+rng.IntN(4))))
			lim = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("2Gi")}
		}
		pods = append(pods, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: ann},
			Spec: corev1.PodSpec{
				SchedulerName: schedulerName,
				Containers: []corev1.Container{{
					Name: "work", Image: "corepin/corepin:bench",
					Resources: corev1.ResourceRequirements{Requests: rl, Limits: lim},
				}},
			},
		})
	}
	return pods
}

func cpuMem(cpu string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("1Gi")}
}

// outcome is what became of one pod of the burst.
type outcome struct {
	created, bound time.Time
	node           string
	unschedulable  bool
}

// watcher records, from a pod informer on the burst's namespace, when
// each pod is bound (first seen with a node) or marked Unschedulable.
type watcher struct {
	mu   sync.Mutex
	pods map[string]*outcome
	// changed is signalled on each outcome recorded.
	changed chan struct{}
}

func watch(ctx context.Context, cs kubernetes.Interface, ns string) (*watcher, error) {
	w := &watcher{pods: map[string]*outcome{}, changed: make(chan struct{}, 1)}
	lw := toolscache.NewListWatchFromClient(cs.CoreV1().RESTClient(), "pods", ns, fields.Everything())
	inf := toolscache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, toolscache.Indexers{})
	see := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		now := time.Now()
		w.mu.Lock()
		o := w.get(p.Name)
		switch {
		case p.Spec.NodeName != "" && o.node == "":
			o.bound, o.node, o.unschedulable = now, p.Spec.NodeName, false
		case p.Spec.NodeName == "" && unschedulable(p):
			o.unschedulable = true
		}
		w.mu.Unlock()
		select {
		case w.changed <- struct{}{}:
		default:
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: see, UpdateFunc: func(_, obj any) { see(obj) },
	}); err != nil {
		return nil, err
	}
	go inf.Run(ctx.Done())
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, fmt.Errorf("the pod informer of %s did not sync", ns)
	}
	return w, nil
}

func (w *watcher) get(name string) *outcome {
	o := w.pods[name]
	if o == nil {
		o = &outcome{}
		w.pods[name] = o
	}
	return o
}

func unschedulable(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

// created records when pod name's creation returned.
func (w *watcher) created(name string, at time.Time) {
	w.mu.Lock()
	w.get(name).created = at
	w.mu.Unlock()
}

// settled counts the pods bound and those Unschedulable.
func (w *watcher) settled() (bound, unsched int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, o := range w.pods {
		switch {
		case o.node != "":
			bound++
		case o.unschedulable:
			unsched++
		}
	}
	return bound, unsched
}

// wait returns when all m pods are bound or Unschedulable, or at limit
// (false), calling progress every 30 s meanwhile.
func (w *watcher) wait(ctx context.Context, m int, limit time.Duration, progress func(bound, unsched int)) bool {
	deadline := time.After(limit)
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	for {
		b, u := w.settled()
		if b+u >= m {
			return true
		}
		select {
		case <-tick.C:
			progress(b, u)
		case <-w.changed:
		case <-time.After(time.Second):
		case <-deadline:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// snapshot copies the outcomes.
func (w *watcher) snapshot() map[string]outcome {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]outcome, len(w.pods))
	for k, o := range w.pods {
		out[k] = *o
	}
	return out
}

// replay places each node's bound pods, in the order they were bound, on
// the state the node publishes, through the node's allocator as the NRI
// plugin admits them (the pod's request as podreq reads it, the node's
// settings applied, alloc.State.Admit: Allocate then GuardPools), and
// returns the pods a node refuses with why.
func replay(nodes map[string]*corev1.Node, pods []*corev1.Pod, out map[string]outcome) ([]string, error) {
	type bind struct {
		pod *corev1.Pod
		at  time.Time
	}
	byNode := map[string][]bind{}
	for _, p := range pods {
		if o := out[p.Name]; o.node != "" {
			byNode[o.node] = append(byNode[o.node], bind{p, o.bound})
		}
	}
	var refused []string
	for name, binds := range byNode {
		n := nodes[name]
		if n == nil {
			return nil, fmt.Errorf("pod bound to unknown node %s", name)
		}
		pub, err := nodestate.DecodeTopology(n.Annotations[nodestate.AnnotationTopology], n.Annotations[nodestate.AnnotationAssigned],
			ptr(n.Annotations[nodestate.AnnotationAllocator]))
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", name, err)
		}
		j, err := nodestate.JudgeTopology(pub)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", name, err)
		}
		slices.SortFunc(binds, func(a, b bind) int { return a.at.Compare(b.at) })
		st := j.State
		for _, b := range binds {
			req, err := podreq.Of(b.pod)
			if err != nil {
				return nil, err
			}
			req, _, err = nodestate.RequestOn(j.Settings, req)
			if err != nil {
				refused = append(refused, fmt.Sprintf("%s on %s: %v", b.pod.Name, name, err))
				continue
			}
			if st == nil {
				refused = append(refused, fmt.Sprintf("%s on %s: no free CPU", b.pod.Name, name))
				continue
			}
			if _, err := st.Admit(req); err != nil {
				refused = append(refused, fmt.Sprintf("%s on %s: %v", b.pod.Name, name, err))
			}
		}
	}
	slices.Sort(refused)
	return refused, nil
}

func ptr(s string) *string { return &s }
