// Package kubeclient connects corepin's cluster commands (kube collect,
// simulate --from-cluster) to a Kubernetes API server the way kubectl
// does: client-go's clientcmd loads the kubeconfig (--kubeconfig, else
// $KUBECONFIG, else ~/.kube/config; contexts, exec and token auth), and
// falls back to the pod's service account inside a cluster. It returns
// client-go's typed clientset; it does not hand-roll REST calls.
package kubeclient

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"k8s.io/client-go/dynamic"
	batchclient "k8s.io/client-go/kubernetes/typed/batch/v1"
	coreclient "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
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

// Client is a connection to one cluster: the typed clients of the core
// and batch API groups, the two corepin reads, and the dynamic client. It has the methods of
// kubernetes.Interface of those names, so code written against them takes
// client-go's fake clientset in tests. Building the whole clientset would
// link every API group's client into corepin.
type Client struct {
	Core  coreclient.CoreV1Interface
	Batch batchclient.BatchV1Interface
	// Dynamic reaches the resources without a typed client (custom
	// resources such as NodeResourceTopology), without Timeout, for
	// informers.
	Dynamic dynamic.Interface
	// Namespace is the namespace Options chose.
	Namespace string
	// Host is the API server's address, for messages.
	Host string
}

// Load builds the client for o. A missing or unusable kubeconfig is an
// error wrapping ErrNoConfig (or clientcmd's own, naming the file or the
// context), made before any request.
func Load(o Options) (*Client, error) {
	cfg, ns, err := restConfig(o)
	if err != nil {
		return nil, err
	}
	core, err := coreclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the client for %s: %w", cfg.Host, err)
	}
	batch, err := batchclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the client for %s: %w", cfg.Host, err)
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
	return &Client{Core: core, Batch: batch, Dynamic: dyn, Namespace: ns, Host: cfg.Host}, nil
}

// HTTP returns the API server's base URL and an HTTP client that
// authenticates as o's kubeconfig says (token, client certificate, exec
// plugin) and trusts its CA, for code that speaks the REST API itself
// (kube/nrt's publisher).
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

// CoreV1 returns the core API group's client.
func (c *Client) CoreV1() coreclient.CoreV1Interface { return c.Core }

// BatchV1 returns the batch API group's client.
func (c *Client) BatchV1() batchclient.BatchV1Interface { return c.Batch }
