// Package kubeclient connects corepin's cluster commands (kube collect,
// kube run, simulate --from-cluster) to a Kubernetes API server the way kubectl
// does: client-go's clientcmd loads the kubeconfig (--kubeconfig, else
// $KUBECONFIG, else ~/.kube/config; contexts, exec and token auth), and
// falls back to the pod's service account inside a cluster. Its requests go
// through client-go's REST client with a scheme of only core/v1 and
// batch/v1: client-go's typed clientsets register every API group and add
// about 12 MB to the binary for the few reads (Reader) and Job writes
// (Writer) corepin makes.
package kubeclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Reader is what corepin's cluster commands read: a sweep's pods and their
// logs, its Jobs, the nodes and cluster-scoped custom resources (the nodes'
// NodeResourceTopology objects). Client implements it; tests give
// client-go's fake clientset (and fake dynamic client) through
// kubeclienttest.
type Reader interface {
	ListPods(ctx context.Context, namespace string, opts metav1.ListOptions) (*corev1.PodList, error)
	PodLog(ctx context.Context, namespace, pod string, opts *corev1.PodLogOptions) (io.ReadCloser, error)
	ListJobs(ctx context.Context, namespace string, opts metav1.ListOptions) (*batchv1.JobList, error)
	ListNodes(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error)
	ListClusterObjects(ctx context.Context, res schema.GroupVersionResource, opts metav1.ListOptions) (*unstructured.UnstructuredList, error)
}

// Writer is what corepin kube run does to a sweep's Jobs besides reading
// them: create one, read it back by name while it runs, delete it once its
// results are recorded. Client implements it; kubeclienttest.Reader does
// too, over client-go's fake clientset.
type Writer interface {
	CreateJob(ctx context.Context, namespace string, job *batchv1.Job, opts metav1.CreateOptions) (*batchv1.Job, error)
	GetJob(ctx context.Context, namespace, name string) (*batchv1.Job, error)
	DeleteJob(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error
}

// scheme knows the two API groups Reader returns.
var (
	scheme = func() *runtime.Scheme {
		s := runtime.NewScheme()
		if err := corev1.AddToScheme(s); err != nil {
			panic(err)
		}
		if err := batchv1.AddToScheme(s); err != nil {
			panic(err)
		}
		return s
	}()
	codecs = serializer.NewCodecFactory(scheme)
	params = runtime.NewParameterCodec(scheme)
)

// ErrNoConfig is wrapped when no kubeconfig is found outside a cluster.
var ErrNoConfig = errors.New("no Kubernetes configuration")

// Timeout bounds each request to the API server.
const Timeout = 30 * time.Second

// Options choose the cluster, as kubectl's flags of the same names do.
type Options struct {
	// Kubeconfig is the kubeconfig file; empty means $KUBECONFIG, else
	// ~/.kube/config, else the in-cluster service account.
	Kubeconfig string
	// Context is the kubeconfig context; empty means its current one.
	Context string
	// Namespace overrides the context's namespace; empty means the
	// context's, else the service account's, else "default".
	Namespace string
	// UserAgent names the caller to the API server.
	UserAgent string
}

// Client is a connection to one cluster: REST clients of the core and
// batch API groups behind Reader, and the dynamic client.
type Client struct {
	core, batch *rest.RESTClient
	// Dynamic reaches the resources without a typed client (custom
	// resources such as NodeResourceTopology), without Timeout, for
	// informers.
	Dynamic dynamic.Interface
	// Namespace is the namespace Options chose.
	Namespace string
	// Host is the API server's address, for messages.
	Host string
}

var (
	_ Reader = (*Client)(nil)
	_ Writer = (*Client)(nil)
)

// Load builds the client for o. A missing or unusable kubeconfig is an
// error wrapping ErrNoConfig (or clientcmd's own, naming the file or the
// context), made before any request.
func Load(o Options) (*Client, error) {
	cfg, ns, err := restConfig(o)
	if err != nil {
		return nil, err
	}
	core, err := restClient(cfg, corev1.SchemeGroupVersion, "/api")
	if err != nil {
		return nil, err
	}
	batch, err := restClient(cfg, batchv1.SchemeGroupVersion, "/apis")
	if err != nil {
		return nil, err
	}
	// Informers watch for minutes through the dynamic client: no
	// per-request timeout there (client-go bounds its list calls and
	// watches with timeoutSeconds itself).
	dcfg := rest.CopyConfig(cfg)
	dcfg.Timeout = 0
	dyn, err := dynamic.NewForConfig(dcfg)
	if err != nil {
		return nil, fmt.Errorf("building the client for %s: %w", cfg.Host, err)
	}
	return &Client{core: core, batch: batch, Dynamic: dyn, Namespace: ns, Host: cfg.Host}, nil
}

// restClient is a REST client of group version gv under apiPath.
func restClient(base *rest.Config, gv schema.GroupVersion, apiPath string) (*rest.RESTClient, error) {
	cfg := rest.CopyConfig(base)
	cfg.GroupVersion = &gv
	cfg.APIPath = apiPath
	cfg.NegotiatedSerializer = codecs.WithoutConversion()
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	c, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the client for %s: %w", cfg.Host, err)
	}
	return c, nil
}

// HTTP returns the API server's base URL and an HTTP client that
// authenticates as o's kubeconfig says (token, client certificate, exec
// plugin) and trusts its CA, for code that speaks the REST API itself
// (the extender's discovery of the NodeResourceTopology version).
func HTTP(o Options) (string, *http.Client, error) {
	cfg, _, err := restConfig(o)
	if err != nil {
		return "", nil, err
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return "", nil, fmt.Errorf("building the HTTP client for %s: %w", cfg.Host, err)
	}
	host := cfg.Host
	if !strings.Contains(host, "://") {
		host = "https://" + host
	}
	return strings.TrimSuffix(host, "/"), hc, nil
}

// Config is the REST configuration of o's kubeconfig (token, token file,
// client certificate, exec plugin; its CA), for clients this package does
// not build (kube/publish's publisher).
func Config(o Options) (*rest.Config, error) {
	cfg, _, err := restConfig(o)
	return cfg, err
}

// restConfig loads o's kubeconfig: the REST configuration and the
// namespace.
func restConfig(o Options) (*rest.Config, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if o.Kubeconfig != "" {
		rules.ExplicitPath = o.Kubeconfig
	}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: o.Context}
	overrides.Context.Namespace = o.Namespace
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	cfg, err := cc.ClientConfig()
	if clientcmd.IsEmptyConfig(err) {
		return nil, "", fmt.Errorf("%w: give --kubeconfig, set $KUBECONFIG or write ~/.kube/config (or run inside a cluster)", ErrNoConfig)
	}
	if err != nil {
		return nil, "", fmt.Errorf("loading the kubeconfig: %w", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, "", fmt.Errorf("reading the namespace: %w", err)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = Timeout
	}
	if o.UserAgent != "" {
		cfg.UserAgent = o.UserAgent
	}
	return cfg, ns, nil
}

// ListPods lists the pods of namespace that opts selects (one page).
func (c *Client) ListPods(ctx context.Context, namespace string, opts metav1.ListOptions) (*corev1.PodList, error) {
	out := &corev1.PodList{}
	err := c.core.Get().Namespace(namespace).Resource("pods").VersionedParams(&opts, params).Timeout(serverTimeout(opts)).Do(ctx).Into(out)
	return out, err
}

// PodLog streams a pod's log as opts asks.
func (c *Client) PodLog(ctx context.Context, namespace, pod string, opts *corev1.PodLogOptions) (io.ReadCloser, error) {
	return c.core.Get().Namespace(namespace).Resource("pods").Name(pod).SubResource("log").VersionedParams(opts, params).Stream(ctx)
}

// ListJobs lists the Jobs of namespace that opts selects (one page).
func (c *Client) ListJobs(ctx context.Context, namespace string, opts metav1.ListOptions) (*batchv1.JobList, error) {
	out := &batchv1.JobList{}
	err := c.batch.Get().Namespace(namespace).Resource("jobs").VersionedParams(&opts, params).Timeout(serverTimeout(opts)).Do(ctx).Into(out)
	return out, err
}

// CreateJob creates job in namespace with opts (FieldValidation "Strict"
// makes the API server refuse a field it does not know instead of
// dropping it) and returns the Job the server stored.
func (c *Client) CreateJob(ctx context.Context, namespace string, job *batchv1.Job, opts metav1.CreateOptions) (*batchv1.Job, error) {
	out := &batchv1.Job{}
	err := c.batch.Post().Namespace(namespace).Resource("jobs").VersionedParams(&opts, params).Body(job).Do(ctx).Into(out)
	return out, err
}

// GetJob reads the Job name of namespace.
func (c *Client) GetJob(ctx context.Context, namespace, name string) (*batchv1.Job, error) {
	out := &batchv1.Job{}
	err := c.batch.Get().Namespace(namespace).Resource("jobs").Name(name).Do(ctx).Into(out)
	return out, err
}

// DeleteJob deletes the Job name of namespace as opts says (its
// PropagationPolicy decides whether its pods go too).
func (c *Client) DeleteJob(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	return c.batch.Delete().Namespace(namespace).Resource("jobs").Name(name).Body(&opts).Do(ctx).Error()
}

// ListNodes lists the nodes opts selects (one page).
func (c *Client) ListNodes(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error) {
	out := &corev1.NodeList{}
	err := c.core.Get().Resource("nodes").VersionedParams(&opts, params).Timeout(serverTimeout(opts)).Do(ctx).Into(out)
	return out, err
}

// ListClusterObjects lists the cluster-scoped objects of resource res that
// opts selects (one page), through the dynamic client, each call bounded
// by Timeout.
func (c *Client) ListClusterObjects(ctx context.Context, res schema.GroupVersionResource, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	return c.Dynamic.Resource(res).List(ctx, opts)
}

// serverTimeout is the list's server-side timeout, as client-go's typed
// clients ask it: opts.TimeoutSeconds, else none (the HTTP client's
// Timeout still bounds the call).
func serverTimeout(opts metav1.ListOptions) time.Duration {
	if opts.TimeoutSeconds == nil {
		return 0
	}
	return time.Duration(*opts.TimeoutSeconds) * time.Second
}
