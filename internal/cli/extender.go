package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/corepin/corepin/kube/extender"
)

const extenderUsage = `Serve the kube-scheduler extender protocol (k8s.io/kube-scheduler/extender/v1).

POST /filter drops the nodes where the pod's CPUs cannot be placed under its
topology policy (pod annotation corepin.io/numa-policy) and CPU wishes (label
koordinator.sh/qosClass, annotation scheduling.koordinator.sh/resource-spec,
else the kubelet QoS class); POST /prioritize scores the rest 0-10 by the
placement each would get. Both run corepin's allocator on the state each node
publishes in its annotations: corepin.io/topology (the compact
"corepin topo -o json" document) with corepin.io/assigned (the "assigned" list
of "corepin plan"), or the coarse corepin.io/numa-free ("[4,0]": free CPUs per
NUMA node); corepin nri --annotate-node (chart value annotateNode) keeps them
up to date. Nodes publishing neither pass, scored 0. A node that could not
take the pod even with nothing held is failed as unresolvable, so the
scheduler does not preempt pods there in vain. GET /healthz answers ok;
GET /metrics serves Prometheus metrics (call durations, filtered nodes).

The scheduler must send whole nodes (nodeCacheCapable: false); the shipped
configuration is deploy/kubernetes/scheduler/scheduler-config.yaml.

The bound address is the first line on stdout (-o json: {"listen": ...}).
Serves until SIGTERM or SIGINT, then finishes the calls in flight and exits 0.

Examples:
  corepin extender                                  # 127.0.0.1:18888
  corepin extender --listen 0.0.0.0:18888 --max-nodes 5000
  corepin extender --listen 127.0.0.1:0 -o json     # any free port, printed`

func init() { register(newExtenderCmd) }

func newExtenderCmd(e *env) *cobra.Command {
	var (
		listen   string
		maxBody  int64
		maxNodes int
	)
	cmd := &cobra.Command{
		Use:   "extender",
		Short: "Serve the kube-scheduler extender (filter, prioritize)",
		Long:  extenderUsage,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if maxBody < 1<<10 || maxBody > 1<<30 {
				return Usagef("--max-body-bytes %d: want 1024 to %d", maxBody, 1<<30)
			}
			if maxNodes < 1 || maxNodes > 100000 {
				return Usagef("--max-nodes %d: want 1 to 100000", maxNodes)
			}
			ext := extender.New(extender.WithMaxBodyBytes(maxBody), extender.WithMaxNodes(maxNodes))
			ctx, stop := signalContext(cmd)
			defer stop()
			ln, err := listenAndAnnounce(ctx, e, listen, func(addr string) any {
				return struct {
					Listen string `json:"listen"`
				}{addr}
			})
			if err != nil {
				return err
			}
			srv := &http.Server{Handler: ext.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, IdleTimeout: 2 * time.Minute}
			errc := make(chan error, 1)
			go func() { errc <- srv.Serve(ln) }()
			select {
			case err := <-errc:
				return fmt.Errorf("serving: %w", err)
			case <-ctx.Done():
			}
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if err := srv.Shutdown(sctx); err != nil {
				return fmt.Errorf("shutting down: %w", err)
			}
			if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("serving: %w", err)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&listen, "listen", "127.0.0.1:18888", "address to listen on (port 0: any free port)")
	fl.Int64Var(&maxBody, "max-body-bytes", extender.DefaultMaxBodyBytes, "largest request body accepted")
	fl.IntVar(&maxNodes, "max-nodes", extender.DefaultMaxNodes, "most nodes in one request")
	return cmd
}
