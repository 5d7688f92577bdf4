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
	"time"

	"k8s.io/client-go/kubernetes"
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

// Client is a connection to one cluster.
type Client struct {
	Clientset kubernetes.Interface
	// Namespace is the namespace Options chose.
	Namespace string
	// Host is the API server's address, for messages.
	Host string
}

// Load builds the client for o. A missing or unusable kubeconfig is an
// error wrapping ErrNoConfig (or clientcmd's own, naming the file or the
// context), made before any request.
func Load(o Options) (*Client, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if o.Kubeconfig != "" {
		rules.ExplicitPath = o.Kubeconfig
	}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: o.Context}
	overrides.Context.Namespace = o.Namespace
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	cfg, err := cc.ClientConfig()
	if clientcmd.IsEmptyConfig(err) {
		return nil, fmt.Errorf("%w: give --kubeconfig, set $KUBECONFIG or write ~/.kube/config (or run inside a cluster)", ErrNoConfig)
	}
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, fmt.Errorf("reading the namespace: %w", err)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = Timeout
	}
	if o.UserAgent != "" {
		cfg.UserAgent = o.UserAgent
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the client for %s: %w", cfg.Host, err)
	}
	return &Client{Clientset: cs, Namespace: ns, Host: cfg.Host}, nil
}
