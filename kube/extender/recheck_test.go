package extender

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
	toolscache "k8s.io/client-go/tools/cache"
)

// countedPods is an extender whose PodStore lists the pods bound (and
// not admitted) from a fake API server whose watch never says anything:
// what changes there afterwards, a deletion included, reaches the store
// only through the extender asking (recheck). gets counts the GETs of
// pods; the store's rate is unbounded unless limiter is given.
func countedPods(t *testing.T, limiter *rate.Limiter, pods ...*corev1.Pod) (*Extender, *PodStore, *dynamicfake.FakeDynamicClient, *atomic.Int64) {
	t.Helper()
	var objs []runtime.Object
	for _, p := range pods {
		objs = append(objs, podObject(t, p))
	}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{PodResource: "PodList"}, objs...)
	client.PrependWatchReactor("pods", func(clienttesting.Action) (bool, watch.Interface, error) {
		return true, watch.NewFake(), nil // silent: the watch lags behind everything below
	})
	gets := new(atomic.Int64)
	client.PrependReactor("get", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		gets.Add(1)
		return false, nil, nil
	})
	s := NewPodStore(100, nil)
	s.rechecks = rate.NewLimiter(rate.Inf, 0)
	if limiter != nil {
		s.rechecks = limiter
	}
	synced, err := s.Watch(t.Context(), client)
	if err != nil {
		t.Fatal(err)
	}
	if !toolscache.WaitForCacheSync(t.Context().Done(), synced) {
		t.Fatal("informer did not sync")
	}
	if s.Len() != len(pods) {
		t.Fatalf("store keeps %d pods after the list, want %d", s.Len(), len(pods))
	}
	return New(WithPods(s)), s, client, gets
}

// A node refused only for the CPUs of pods counted there (bound, not yet
// admitted) is judged again once the extender has asked the API server
// about them: a pod deleted (or finished, or made again under its name)
// while the watch has not said so yet frees its CPUs at once, instead of
// the refused pod waiting for kube-scheduler's next retry. Asking fails
// safe: a pod still there, a GET that fails, or none left to make keeps
// the pod counted and the node refused.
func TestCountedPodsAreAskedForBeforeRefusing(t *testing.T) {
	five := map[string]string{AnnotationNUMAPolicy: "single-numa-node"}
	third := guaranteedPod("third", "5", five, nil)
	refused := "no NUMA node with 5 free CPUs" + ComingSuffix
	for _, tc := range []struct {
		name string
		// change is what the API server does after the pods were listed.
		change  func(t *testing.T, c *dynamicfake.FakeDynamicClient)
		limiter *rate.Limiter
		// wantKept: n1 takes the third pod; wantLen pods stay counted.
		wantKept bool
		wantLen  int
	}{
		{name: "both still there", change: func(*testing.T, *dynamicfake.FakeDynamicClient) {}, wantLen: 2},
		{name: "one deleted", change: func(t *testing.T, c *dynamicfake.FakeDynamicClient) {
			if err := c.Resource(PodResource).Namespace("bench").Delete(t.Context(), "u1", metavDelete); err != nil {
				t.Fatal(err)
			}
		}, wantKept: true, wantLen: 1},
		{name: "one finished", change: func(t *testing.T, c *dynamicfake.FakeDynamicClient) {
			done := boundPodOn("u1", "n1", "5")
			done.Status.Phase = corev1.PodSucceeded
			if _, err := c.Resource(PodResource).Namespace("bench").Update(t.Context(), podObject(t, done), metavUpdate); err != nil {
				t.Fatal(err)
			}
		}, wantKept: true, wantLen: 1},
		{name: "one made again on another node", change: func(t *testing.T, c *dynamicfake.FakeDynamicClient) {
			pods := c.Resource(PodResource).Namespace("bench")
			if err := pods.Delete(t.Context(), "u1", metavDelete); err != nil {
				t.Fatal(err)
			}
			again := boundPodOn("u1", "n2", "5")
			again.UID = "u1-again"
			if _, err := pods.Create(t.Context(), podObject(t, again), metavOpts); err != nil {
				t.Fatal(err)
			}
		}, wantKept: true, wantLen: 2},
		{name: "one deleted, the GET fails", change: func(t *testing.T, c *dynamicfake.FakeDynamicClient) {
			if err := c.Resource(PodResource).Namespace("bench").Delete(t.Context(), "u1", metavDelete); err != nil {
				t.Fatal(err)
			}
			c.PrependReactor("get", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
				return true, nil, errors.New("connection refused")
			})
		}, wantLen: 2},
		{name: "one deleted, no GET left this second", limiter: rate.NewLimiter(0, 0), change: func(t *testing.T, c *dynamicfake.FakeDynamicClient) {
			if err := c.Resource(PodResource).Namespace("bench").Delete(t.Context(), "u1", metavDelete); err != nil {
				t.Fatal(err)
			}
		}, wantLen: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, s, client, gets := countedPods(t, tc.limiter, boundPodOn("u1", "n1", "5"), boundPodOn("u2", "n1", "5"))
			n1 := burstNode(t, "n1", nil, map[string]string{})
			tc.change(t, client)
			kept, failed := judgeBoth(t, e, third, n1)
			if got := len(kept) == 1; got != tc.wantKept {
				t.Errorf("n1 kept %v (failed %v), want kept %v", kept, failed, tc.wantKept)
			}
			if !tc.wantKept && failed["n1"] != refused {
				t.Errorf("n1 failed with %q, want %q", failed["n1"], refused)
			}
			if s.Len() != tc.wantLen {
				t.Errorf("store keeps %d pods, want %d", s.Len(), tc.wantLen)
			}
			if tc.limiter != nil && gets.Load() != 0 {
				t.Errorf("%d GETs past the store's rate, want none", gets.Load())
			}
		})
	}
}

// One call asks for at most MaxRecheckPods pods, however many are counted
// on the nodes it refuses.
func TestRecheckAsksForFewPodsPerCall(t *testing.T) {
	var pods []*corev1.Pod
	var nodes []corev1.Node
	for i := range 3 {
		name := fmt.Sprintf("n%d", i)
		nodes = append(nodes, burstNode(t, name, nil, map[string]string{}))
		for j := range 2 {
			pods = append(pods, boundPodOn(fmt.Sprintf("u%d-%d", i, j), name, "5"))
		}
	}
	e, s, _, gets := countedPods(t, nil, pods...)
	third := guaranteedPod("third", "5", map[string]string{AnnotationNUMAPolicy: "single-numa-node"}, nil)
	code, out := post(t, e.Handler(), "/filter", args(t, third, nodes...))
	if code != http.StatusOK || strings.Count(string(out), ComingSuffix) != 3 {
		t.Fatalf("POST /filter = %d %s, want the 3 nodes refused for their coming pods", code, out)
	}
	if got := gets.Load(); got != MaxRecheckPods {
		t.Errorf("one call made %d GETs, want %d (MaxRecheckPods)", got, MaxRecheckPods)
	}
	if s.Len() != len(pods) {
		t.Errorf("store keeps %d pods, want all %d (all still there)", s.Len(), len(pods))
	}
}
