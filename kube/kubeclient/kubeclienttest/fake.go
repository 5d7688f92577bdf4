// Package kubeclienttest adapts a client-go clientset (in tests, the fake
// one from k8s.io/client-go/kubernetes/fake) to kubeclient.Reader and
// kubeclient.Writer. Only
// tests import it: the typed clientsets stay out of corepin's binary.
package kubeclienttest

import (
	"context"
	"errors"
	"io"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/corepin/corepin/kube/kubeclient"
)

// Reader reads through a clientset and, for ListClusterObjects, a dynamic
// client (k8s.io/client-go/dynamic/fake in tests).
type Reader struct {
	kubernetes.Interface
	// Dynamic serves ListClusterObjects; nil fails it.
	Dynamic dynamic.Interface
}

var (
	_ kubeclient.Reader = Reader{}
	_ kubeclient.Writer = Reader{}
)

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

// CreateJob implements kubeclient.Writer.
func (r Reader) CreateJob(ctx context.Context, namespace string, job *batchv1.Job, opts metav1.CreateOptions) (*batchv1.Job, error) {
	return r.BatchV1().Jobs(namespace).Create(ctx, job, opts)
}

// GetJob implements kubeclient.Writer.
func (r Reader) GetJob(ctx context.Context, namespace, name string) (*batchv1.Job, error) {
	return r.BatchV1().Jobs(namespace).Get(ctx, name, metav1.GetOptions{})
}

// DeleteJob implements kubeclient.Writer.
func (r Reader) DeleteJob(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	return r.BatchV1().Jobs(namespace).Delete(ctx, name, opts)
}

// ListNodes implements kubeclient.Reader.
func (r Reader) ListNodes(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error) {
	return r.CoreV1().Nodes().List(ctx, opts)
}

// ListClusterObjects implements kubeclient.Reader through Dynamic.
func (r Reader) ListClusterObjects(ctx context.Context, res schema.GroupVersionResource, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	if r.Dynamic == nil {
		return nil, errors.New("kubeclienttest.Reader: no Dynamic client to list " + res.String())
	}
	return r.Dynamic.Resource(res).List(ctx, opts)
}
