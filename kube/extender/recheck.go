package extender

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/kube/nodeview"
)

// A PodStore learns that a pod went from its watch, which can lag behind
// the API server: a pod deleted a moment ago may still be counted on its
// node, and a pod the extender refuses for its CPUs waits for
// kube-scheduler's next retry of unschedulable pods (up to
// --pod-max-in-unschedulable-pods-duration). So before /filter refuses a
// node only for CPUs the pods counted there hold (a reason ending
// ComingSuffix), it asks the API server for those pods, within bounds:
// at most MaxRecheckPods per call, all within RecheckTimeout, and at most
// RecheckRate per second across calls (never waiting for it). A pod gone
// is forgotten and the node judged again; a GET that fails, or one the
// bounds leave out, keeps the pod counted, as before.
const (
	// MaxRecheckPods bounds the pods one call asks the API server for.
	MaxRecheckPods = 4
	// RecheckTimeout bounds the time one call spends asking, from its
	// first GET (kube-scheduler's shipped httpTimeout is 5 s).
	RecheckTimeout = time.Second
	// RecheckRate bounds the pods asked for per second across calls (and
	// at once), below client-go's default client rate (5 per second,
	// bursts of 10) so that a call never waits for the client's own
	// limiter: past it a call asks nothing.
	RecheckRate = 4
)

// recheck is one call's budget for asking the API server about the pods
// counted on the nodes it refuses (Extender.confirm).
type recheck struct {
	parent context.Context
	// ctx is set by the call's first GET and ends RecheckTimeout later.
	ctx    context.Context
	cancel context.CancelFunc
	left   int
}

// newRecheck is the budget of a call made under ctx; done releases it.
func newRecheck(ctx context.Context) *recheck { return &recheck{parent: ctx, left: MaxRecheckPods} }

func (rc *recheck) done() {
	if rc.cancel != nil {
		rc.cancel()
	}
}

// confirm is v, node name's verdict for req under key, judged again when v
// refuses the pod for CPUs only the pods counted there hold (ComingSuffix)
// and asking the API server about them (PodStore.recheck) forgot one.
func (e *Extender) confirm(rc *recheck, name string, req alloc.Request, reqErr error, key nodeview.Key, v nodeview.Verdict) nodeview.Verdict {
	if e.pods == nil || v.OK || !strings.HasSuffix(v.Reason, ComingSuffix) {
		return v
	}
	if e.pods.recheck(rc, e.view.Holding(name)) == 0 {
		return v
	}
	return e.view.Judge(name, req, reqErr, key)
}

// recheck asks the API server (the client Watch watches through) for the
// pods of UIDs uids, in order, within rc's budget and the store's rate,
// and returns how many of them it forgot: a pod not found; a pod of
// another UID under the name (deleted and made again: the one found is
// kept in its place, as Set keeps it); a pod found finished. A GET that
// fails keeps the pod counted.
func (s *PodStore) recheck(rc *recheck, uids []string) (forgot int) {
	s.mu.RLock()
	client := s.client
	s.mu.RUnlock()
	if client == nil {
		return 0
	}
	for _, uid := range uids {
		s.mu.RLock()
		p := s.byUID[uid]
		s.mu.RUnlock()
		if p == nil || p.name == "" {
			continue
		}
		if rc.left <= 0 || !s.rechecks.Allow() {
			return forgot
		}
		rc.left--
		if rc.ctx == nil {
			rc.ctx, rc.cancel = context.WithTimeout(rc.parent, RecheckTimeout)
		}
		pod := p.namespace + "/" + p.name
		u, err := client.Resource(PodResource).Namespace(p.namespace).Get(rc.ctx, p.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			s.log.Info("forgetting a pod counted on its node: the API server no longer has it", "pod", pod, "node", p.node)
			s.Delete(uid)
			forgot++
			continue
		}
		var found corev1.Pod
		if err == nil {
			found, err = podOf(trimmed(u))
		}
		if err != nil {
			s.log.Debug("keeping a pod counted on its node: asking the API server failed", "pod", pod, "node", p.node, "err", err)
			continue
		}
		if string(found.UID) != uid {
			s.log.Info("forgetting a pod counted on its node: the API server has another pod of its name", "pod", pod, "node", p.node)
			s.Delete(uid)
		}
		s.Set(&found)
		if !s.has(uid) {
			forgot++
		}
	}
	return forgot
}

// has reports whether the store keeps the pod of UID uid.
func (s *PodStore) has(uid string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, ok := s.byUID[uid]
	return ok
}
