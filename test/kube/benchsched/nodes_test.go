package benchsched

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/internal/testutil"
	"github.com/corepin/corepin/kube/nodestate"
	"github.com/corepin/corepin/topology"
)

// machine is one real machine type of the fixtures, read by the project's
// topology reader from its extracted sysfs dump.
type machine struct {
	name string
	topo *topology.Topology
}

// machines reads every sysfs dump of the fixtures (the 2x64x2 8-NUMA
// 128arm one among them), each extracted to a temporary directory and
// read through topology.Open as `corepin topo --sysfs-root` reads it.
func machines(t *testing.T) []machine {
	var out []machine
	for _, name := range testutil.Fixtures(t) {
		dir := testutil.ExtractTarBz2(t, name)
		topo, err := topology.Open(dir)
		if err != nil {
			t.Fatalf("reading fixture %s: %v", name, err)
		}
		out = append(out, machine{name: name, topo: topo})
	}
	return out
}

// benchNode is one node of the benchmark: its API object and the
// machine type it was drawn from.
type benchNode struct {
	obj     *corev1.Node
	machine string
}

// makeNodes builds n nodes cycling through the machine types, each at a
// random occupancy (rng): exclusive workloads of 1 to 8 CPUs and a few
// shared quotas held until a drawn share (0 to 75%) of its CPUs is
// taken, published through kube/nodestate's encoder as a corepin node
// publishes them (every entry naming a pod UID).
func makeNodes(t *testing.T, ms []machine, n int, rng *rand.Rand) []benchNode {
	out := make([]benchNode, 0, n)
	for i := range n {
		m := ms[i%len(ms)]
		st, err := alloc.NewState(m.topo, alloc.NodeSettings{})
		if err != nil {
			t.Fatalf("machine %s: %v", m.name, err)
		}
		total := m.topo.Allowed().Size()
		target := int(float64(total) * 0.75 * rng.Float64())
		pods := map[string]string{}
		for k := 0; total-st.Pools().LS.Size() < target && k < 200; k++ {
			id := fmt.Sprintf("held/w%d", k)
			req := alloc.Request{ID: id, QoS: alloc.LSE, CPUs: 1 + rng.IntN(8)}
			if rng.IntN(5) == 0 {
				req = alloc.Request{ID: id, QoS: alloc.LS, MilliCPUs: 250 * (1 + rng.IntN(8))}
			}
			if _, err := st.Admit(req); err == nil {
				pods[id] = fmt.Sprintf("00000000-0000-4000-8000-%012d", i*1000+k)
			}
		}
		ann, _, err := nodestate.NodeAnnotations(st, alloc.TopologyNone, pods)
		if err != nil {
			t.Fatalf("encoding node %d (%s): %v", i, m.name, err)
		}
		name := fmt.Sprintf("node-%05d", i)
		out = append(out, benchNode{obj: nodeObject(name, total, ann), machine: m.name})
	}
	return out
}

// nodeObject is a Ready node of cpus CPUs (capacity and allocatable, no
// kubelet) carrying the annotations ann.
func nodeObject(name string, cpus int, ann nodestate.Annotations) *corev1.Node {
	res := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(strconv.Itoa(cpus)),
		corev1.ResourceMemory: resource.MustParse("512Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	annotations := map[string]string{}
	for k, v := range ann {
		if v != nil {
			annotations[k] = *v
		}
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}, Annotations: annotations},
		Status: corev1.NodeStatus{
			Capacity: res, Allocatable: res,
			Conditions: []corev1.NodeCondition{{
				Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
				LastHeartbeatTime: metav1.NewTime(time.Now()),
			}},
		},
	}
}

// createAll runs create for each index below n on workers goroutines and
// returns the first error.
func createAll(n, workers int, create func(i int) error) error {
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	next := make(chan int)
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := create(i); err != nil {
					once.Do(func() { first = err })
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

// createNodes creates the nodes' API objects, status included (the API
// server keeps a new Node's status; no kubelet will write it).
func createNodes(ctx context.Context, cs kubernetes.Interface, nodes []benchNode) error {
	return createAll(len(nodes), 32, func(i int) error {
		n := nodes[i].obj
		if _, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating node %s: %w", n.Name, err)
		}
		return nil
	})
}
