package extender

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	toolscache "k8s.io/client-go/tools/cache"
)

// ServeConfig is what Serve runs: the extender's limits, the cluster
// objects it watches, and where it listens.
type ServeConfig struct {
	// MaxBodyBytes, MaxNodes and MemoryLimit are WithMaxBodyBytes,
	// WithMaxNodes (also the most NodeResourceTopology objects kept) and
	// WithMemoryLimit.
	MaxBodyBytes int64
	MaxNodes     int
	MemoryLimit  int64
	// Dynamic is the client the informers watch through, at Host (named
	// in errors); needed only with NRT or TrackPods.
	Dynamic dynamic.Interface
	Host    string
	// NRT, when not empty, is the NodeResourceTopology resource watched
	// (NRTResourceOf picks it): WithNRT.
	NRT schema.GroupVersionResource
	// TrackPods watches the pods bound to nodes, at most MaxPods:
	// WithPods.
	TrackPods bool
	MaxPods   int
	// SyncTimeout ends Serve with an error when an informer has not
	// listed its objects within it.
	SyncTimeout time.Duration
	// Listen returns the listener of the scheduler's verbs (Handler),
	// called once the informers have started; its error is returned as
	// is.
	Listen func() (net.Listener, error)
	// OpsListen, when not nil, returns a listener for GET /healthz and
	// GET /metrics alone (OpsHandler); its error is returned as is.
	OpsListen func() (net.Listener, error)
	// Log receives the informers' warnings (nil: slog.Default()).
	Log *slog.Logger
}

// Serve runs the extender of cfg until ctx ends: it starts the informers
// (GET /healthz answers 503 until they have listed their objects once),
// listens, and serves; then it finishes the calls in flight (at most 10 s)
// and returns nil. An informer not synced within cfg.SyncTimeout, or a
// server that stops, ends it with an error.
func Serve(ctx context.Context, cfg ServeConfig) error {
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	opts := []Option{WithMaxBodyBytes(cfg.MaxBodyBytes), WithMaxNodes(cfg.MaxNodes), WithMemoryLimit(cfg.MemoryLimit)}
	syncErr := make(chan error, 2)
	var readies []func() bool
	if !cfg.NRT.Empty() {
		log.Info("watching NodeResourceTopology objects", "version", cfg.NRT.GroupVersion().String())
		store := NewNRTStore(cfg.MaxNodes, log)
		synced, err := store.Watch(ctx, cfg.Dynamic, cfg.NRT)
		if err != nil {
			return err
		}
		opts = append(opts, WithNRT(store))
		readies = append(readies, synced)
		waitSynced(ctx, syncErr, synced, cfg.SyncTimeout, cfg.Host, "NodeResourceTopology objects",
			"is the CRD noderesourcetopologies.topology.node.k8s.io installed, and may the extender list and watch them?")
	}
	if cfg.TrackPods {
		log.Info("watching the pods bound to nodes", "max", cfg.MaxPods)
		store := NewPodStore(cfg.MaxPods, log)
		synced, err := store.Watch(ctx, cfg.Dynamic)
		if err != nil {
			return err
		}
		opts = append(opts, WithPods(store))
		readies = append(readies, synced)
		waitSynced(ctx, syncErr, synced, cfg.SyncTimeout, cfg.Host, "pods", "may the extender list and watch pods in all namespaces?")
	}
	if len(readies) > 0 {
		opts = append(opts, WithReady(func() bool {
			for _, r := range readies {
				if !r() {
					return false
				}
			}
			return true
		}))
	}
	ext := New(opts...)
	ln, err := cfg.Listen()
	if err != nil {
		return err
	}
	servers := []*http.Server{{Handler: ext.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, IdleTimeout: 2 * time.Minute}}
	listeners := []net.Listener{ln}
	if cfg.OpsListen != nil {
		mln, err := cfg.OpsListen()
		if err != nil {
			ln.Close()
			return err
		}
		servers = append(servers, &http.Server{Handler: ext.OpsHandler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute})
		listeners = append(listeners, mln)
	}
	return serveUntil(ctx, servers, listeners, syncErr)
}

// serveUntil serves each server on its listener until one stops (an
// error), syncErr receives one, or ctx ends (then shuts them down).
func serveUntil(ctx context.Context, servers []*http.Server, listeners []net.Listener, syncErr <-chan error) error {
	errc := make(chan error, len(servers))
	for i, srv := range servers {
		go func() { errc <- srv.Serve(listeners[i]) }()
	}
	select {
	case err := <-errc:
		for _, srv := range servers {
			srv.Close()
		}
		return fmt.Errorf("serving: %w", err)
	case err := <-syncErr:
		for _, srv := range servers {
			srv.Close()
		}
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var errs []error
	for _, srv := range servers {
		if err := srv.Shutdown(sctx); err != nil {
			errs = append(errs, fmt.Errorf("shutting down: %w", err))
		}
	}
	for range servers {
		if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, fmt.Errorf("serving: %w", err))
		}
	}
	return errors.Join(errs...)
}

// waitSynced reports an error on errc, which must have room for it, if
// synced has not reported true within limit (and nothing once it has, or
// ctx ended); what names the informer, hint what to check.
func waitSynced(ctx context.Context, errc chan<- error, synced func() bool, limit time.Duration, host, what, hint string) {
	go func() {
		wctx, cancel := context.WithTimeout(ctx, limit)
		defer cancel()
		if toolscache.WaitForCacheSync(wctx.Done(), synced) || ctx.Err() != nil {
			return
		}
		errc <- fmt.Errorf("listing %s at %s: not synced within %s (--nrt-sync-timeout): %s", what, host, limit, hint)
	}()
}
