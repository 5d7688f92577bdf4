// Package publish writes what a corepin node publishes for the schedulers
// to the API server, through client-go: its NodeResourceTopology object
// (topology.node.k8s.io/v1alpha2, nodestate.BuildNRTWith; the CRD of
// kubernetes-sigs/noderesourcetopology-api must be installed, it installs
// none) and the corepin.io/ annotations of its own Node
// (nodestate.NodeAnnotations, kept by Annotator). kube/nodestate encodes
// both; this package only sends them.
//
// The connection is client-go's: in a pod, rest.InClusterConfig, whose
// transport re-reads the projected service-account token file (at most a
// minute old, so a token the kubelet rotates is picked up before the old
// one expires); outside, a kubeconfig (kube/kubeclient). Requests are
// rate limited (QPS, Burst) by the client, and transient failures
// (conflicts, 429, 5xx, timeouts, a connection reset or refused) are
// retried with client-go's exponential backoff (util/retry).
package publish

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"github.com/corepin/corepin/kube/nodestate"
)

// Resources the publisher writes.
var (
	// nrtResource is the NodeResourceTopology objects (cluster-scoped),
	// the version corepin publishes.
	nrtResource = schema.FromAPIVersionAndKind(nodestate.NRTAPIVersion, nodestate.NRTKind).GroupVersion().WithResource("noderesourcetopologies")
	nodes       = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
)

// Rate limit of the publisher's client. A node publishes after each
// change of its state, coalesced (kube/nri): one NRT write and one Node
// patch a time. 5 requests a second with bursts of 10 let a publication
// (and its retries) through at once and cap what a node under constant
// churn sends at about two publications a second; a publication the
// limiter delays is not lost, the next one carries the newest state.
const (
	QPS   = 5
	Burst = 10
	// Timeout bounds each request.
	Timeout = 10 * time.Second
)

// backoff is the publisher's retry schedule for transient failures
// (retriable): 5 tries, waiting 200ms, 400ms, 800ms and 1.6s (±10%)
// between them, within the 10s kube/nri gives a publication.
var backoff = wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 5}

// Publisher writes a node's NodeResourceTopology object and annotations.
type Publisher struct {
	dyn     dynamic.Interface
	backoff wait.Backoff
}

// ErrNotInCluster means the in-cluster configuration is missing.
var ErrNotInCluster = errors.New("not running in a Kubernetes pod (no KUBERNETES_SERVICE_HOST or service account)")

// InCluster is a Publisher with the pod's service account: client-go's
// rest.InClusterConfig, whose transport re-reads the token file as the
// kubelet rotates it.
func InCluster(userAgent string) (*Publisher, error) {
	cfg, err := rest.InClusterConfig()
	if errors.Is(err, rest.ErrNotInCluster) {
		return nil, ErrNotInCluster
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotInCluster, err)
	}
	cfg.UserAgent = userAgent
	return New(cfg)
}

// New is a Publisher speaking to the API server of cfg, with cfg's
// credentials (a token file is re-read as it rotates) and the
// publisher's rate limit (QPS, Burst) and request Timeout in place of
// cfg's.
func New(cfg *rest.Config) (*Publisher, error) {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst, c.Timeout = QPS, Burst, Timeout
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	dyn, err := dynamic.NewForConfig(c)
	if err != nil {
		return nil, fmt.Errorf("building the client for %s: %w", c.Host, err)
	}
	return &Publisher{dyn: dyn, backoff: backoff}, nil
}

// Publish creates or updates o: a JSON merge patch of its zones and
// attributes (lists, so the patch replaces them whole), and a create when
// the object does not exist yet. Transient failures are retried.
func (p *Publisher) Publish(ctx context.Context, o nodestate.NRTObject) error {
	patch, err := json.Marshal(map[string]any{"zones": o.Zones, "attributes": o.Attributes})
	if err != nil {
		return fmt.Errorf("encoding the NodeResourceTopology: %w", err)
	}
	full, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&o)
	if err != nil {
		return fmt.Errorf("encoding the NodeResourceTopology: %w", err)
	}
	res := p.dyn.Resource(nrtResource)
	err = p.retry(ctx, func() error {
		_, err := res.Patch(ctx, o.Metadata.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		if !apierrors.IsNotFound(err) {
			return err
		}
		_, err = res.Create(ctx, &unstructured.Unstructured{Object: full}, metav1.CreateOptions{})
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("%w (is the CRD noderesourcetopologies.topology.node.k8s.io installed?)", err)
		}
		return err // AlreadyExists (a create raced ours): retried as a patch
	})
	if err != nil {
		return fmt.Errorf("publishing the NodeResourceTopology %s: %w", o.Metadata.Name, err)
	}
	return nil
}

// AnnotateNode merge-patches node's annotations with ann, and nothing
// else of the Node: a value sets one, nil removes it. Transient failures
// are retried.
func (p *Publisher) AnnotateNode(ctx context.Context, node string, ann nodestate.Annotations) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	if err != nil {
		return fmt.Errorf("annotating node %s: %w", node, err)
	}
	err = p.retry(ctx, func() error {
		_, err := p.dyn.Resource(nodes).Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("annotating node %s: no such node (is --node-name right?): %w", node, err)
	}
	if err != nil {
		return fmt.Errorf("annotating node %s: %w", node, err)
	}
	return nil
}

// retry calls fn until it succeeds, fails for good (not retriable) or
// p.backoff's steps run out, or ctx ends.
func (p *Publisher) retry(ctx context.Context, fn func() error) error {
	return retry.OnError(p.backoff, func(err error) bool { return ctx.Err() == nil && retriable(err) }, fn)
}

// retriable says whether err may pass by itself: a conflict or an object
// created meanwhile, the server's 429 or 5xx, a timeout, or a connection
// refused, reset or cut (an API server restarting). Refusals (400, 401,
// 403, 404, 422) are not.
func retriable(err error) bool {
	if err == nil {
		return false
	}
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		code := st.Status().Code
		return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsTooManyRequests(err) ||
			apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || code >= 500
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	return utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) || utilnet.IsTimeout(err)
}
