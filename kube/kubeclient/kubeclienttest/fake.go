// Package kubeclienttest adapts a client-go clientset (in tests, the fake
// one from k8s.io/client-go/kubernetes/fake) to kubeclient.Reader. Only
// tests import it: the typed clientsets stay out of corepin's binary.
package kubeclienttest

import (
	"context"
	"io"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/corepin/corepin/kube/kubeclient"
)

// Reader reads through a clientset.
type Reader struct{ kubernetes.Interface }

var _ kubeclient.Reader = Reader{}

// ListPods implements kubeclient.Reader.
func (r Reader) ListPods(ctx context.Context, namespace string, opts metav1.ListOptions) (*corev1.PodList, error) {
	return r.CoreV1().Pods(namespace).List(ctx, opts)
}

// PodLog implements kubeclient.Reader.
func (r Reader) PodLog(ctx context.Context, namespace, pod string, opts *corev1.PodLogOptions) (io.ReadCloser, error) {
	return r.CoreV1().Pods(namespace).GetLogs(pod, opts).Stream(ctx)
}

// ListJobs implements kubeclient.Reader.
func (r Reader) ListJobs(ctx context.Context, namespace string, opts metav1.ListOptions) (*batchv1.JobList, error) {
	return r.BatchV1().Jobs(namespace).List(ctx, opts)
}

// ListNodes implements kubeclient.Reader.
func (r Reader) ListNodes(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error) {
	return r.CoreV1().Nodes().List(ctx, opts)
}
