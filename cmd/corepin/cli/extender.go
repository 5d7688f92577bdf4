package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/corepin/corepin/kube/extender"
	"github.com/corepin/corepin/kube/kubeclient"
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
NUMA node), each beside corepin.io/allocator, the node allocator's settings
('{"policy":"kubelet","options":["full-pcpus-only"],"topology_policy":"single-numa-node"}'):
the node is judged under its own policy and options, and its topology_policy
is the default of pods that name none (as the NRI plugin applies it); a node
without it is judged as policy corepin, no options, topology policy none.
corepin nri --annotate-node (chart value annotateNode) keeps them up to date.

With --nrt it also watches the cluster's NodeResourceTopology objects
(topology.node.k8s.io: v1alpha2 as corepin nri --publish-nrt and NFD's
topology-updater publish them, or v1alpha1, Koordinator's, when the API server
serves only that; the CRD must be installed, else the extender exits 1 at
start, and the extender may list and watch noderesourcetopologies) and judges
a node without corepin annotations by its object. An object Koordinator's
koordlet wrote carries the node's whole CPU topology in annotations
(node.koordinator.sh/cpu-topology: every CPU's core, socket and NUMA node;
one L3 is assumed per socket and NUMA node, Koordinator names none): the
node is judged on that machine as a corepin node is, with the CPUs of
node.koordinator.sh/pod-cpu-allocs held, those missing from the shared pools
(node.koordinator.sh/cpu-shared-pools) held by Koordinator's LSE and LSR pods,
and kubelet.koordinator.sh/cpu-manager-policy's reservedCPUs,
node.koordinator.sh/reservation and exclusive system QoS CPUs reserved; a
static kubelet policy is judged by the kubelet engine with the options it
sets true, none by corepin's. A malformed one of these fails the node,
naming it. Such a node's own labels apply as koord-scheduler applies them:
node.koordinator.sh/numa-topology-policy (None, BestEffort, Restricted or
SingleNUMANode) replaces the object's topology policy (under a static kubelet
policy the stricter of the two holds: the kubelet still admits by its own),
and node.koordinator.sh/cpu-bind-policy FullPCPUsOnly makes every exclusive
pod take whole cores (as full-pcpus-only), SpreadByPCPUs one CPU per core
first (None or empty: no constraint), and
node.koordinator.sh/numa-allocate-strategy (MostAllocated, the default,
LeastAllocated or DistributeEvenly) picks the NUMA node an exclusive pod's
CPUs come from, under corepin's engine; an unknown value fails the node,
naming the label. Otherwise the "available" cpu of each zone of type Node (node-0,
node-1, ...) stands for its free CPUs per NUMA node, as corepin.io/numa-free
would. The attributes topologyManagerPolicy, corepin.io/policy and
corepin.io/options (comma-joined) are its settings; absent
topologyManagerPolicy, v1alpha1's topologyPolicies (SingleNUMANodeContainerLevel,
...) is its default topology policy. An object with fractional, negative or
malformed zones or unknown settings is logged on stderr and fails its node,
as a malformed annotation does: the node takes no pod that needs aligned
CPUs (pinned, exclusive or under a topology policy), which is told why;
pods that need nothing of corepin still pass. The cluster
is chosen as kubectl does: --kubeconfig, else $KUBECONFIG, else
~/.kube/config, else the pod's service account; --context picks a context.
Until the informer has listed the objects once, GET /healthz answers 503
(filter and prioritize answer meanwhile, with the objects known so far); if
it has not within --nrt-sync-timeout, the extender exits 1 (the same holds
for the pods of --track-pods).

With --track-pods it also watches the pods bound to nodes (all namespaces;
the extender may list and watch pods) and, on a node whose corepin.io/allocator
says "pod_uids":true (corepin nri names each assignment's pod in
corepin.io/assigned), places the pods bound there that no entry names yet
before judging: pods the scheduler bound a moment ago that the node's NRI
plugin has not admitted and published. A node judged by its
NodeResourceTopology object (--nrt), which names no pods, is judged with the
pods bound to it after the object last changed (those bound before the
extender started are taken to be in it): pods koordlet or the topology
exporter has not reported yet. Without it a burst of pods is judged on the
same free CPUs, and the node refuses those past what it has after they are
bound. A refusal only they cause ends "(counting pods bound there and not
yet admitted)"; before answering it, the extender asks the API server for
those pods (at most 4 per call, within a second, 4 per second in all; it
may get pods) and judges the node again without the ones deleted since.
At most --max-pods are kept.

Nodes publishing none of these pass, scored 0. A node that could not take
the pod even with nothing held is failed as unresolvable, so the scheduler
does not preempt pods there in vain. GET /healthz answers ok; GET /metrics
serves Prometheus metrics (call durations, filtered nodes).
--metrics-listen serves those two alone on an address of their own, for
kubelet probes and Prometheus while the scheduler's verbs stay on loopback.

Memory: --memory-limit (the chart passes the container's limit) bounds what
the extender holds. It reads a body as a stream, one node at a time, keeping
only the nodes it keeps; the bodies of the calls in flight add up to at most a
quarter of the limit (a call that does not fit waits its turn; with 64 calls
waiting, one more is answered 503), the decoded node states it keeps to an
eighth, and, when the flag is given, the Go runtime's soft limit is 90% of it
(unless GOMEMLIMIT is set). A big call gives its
memory back to the system when it ends.

The scheduler must send whole nodes (nodeCacheCapable: false); the shipped
configuration is deploy/kubernetes/scheduler/scheduler-config.yaml.

The bound address is the first line on stdout (-o json: {"listen": ...,
"metrics_listen": ...}, the second when --metrics-listen is given).
Serves until SIGTERM or SIGINT, then finishes the calls in flight and exits 0.

Examples:
  corepin extender                                  # 127.0.0.1:18888
  corepin extender --listen 0.0.0.0:18888 --max-nodes 5000
  corepin extender --listen 127.0.0.1:0 -o json     # any free port, printed
  corepin extender --nrt                            # also NodeResourceTopology (v1alpha2 or v1alpha1), in-cluster
  corepin extender --nrt --kubeconfig ~/.kube/config --context prod
  corepin extender --track-pods                     # count pods bound and not yet admitted, in-cluster`

func init() { register(newExtenderCmd) }

func newExtenderCmd(e *env) *cobra.Command {
	var (
		listen        string
		metricsListen string
		maxBody       int64
		maxNodes      int
		memLimit      int64
		useNRT        bool
		trackPods     bool
		maxPods       int
		kube          kubeFlags
		syncWait      time.Duration
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
			if !useNRT && !trackPods {
				if n := changed(cmd, "kubeconfig", "context", "nrt-sync-timeout"); n != "" {
					return Usagef("--%s needs --nrt or --track-pods", n)
				}
			}
			if !trackPods && changed(cmd, "max-pods") != "" {
				return Usagef("--max-pods needs --track-pods")
			}
			if maxPods < 1 || maxPods > 1000000 {
				return Usagef("--max-pods %d: want 1 to 1000000", maxPods)
			}
			if syncWait <= 0 || syncWait > time.Hour {
				return Usagef("--nrt-sync-timeout %s: want more than 0 and at most 1h", syncWait)
			}
			if memLimit < 64<<20 || memLimit > 1<<40 {
				return Usagef("--memory-limit %d: want %d to %d bytes", memLimit, 64<<20, int64(1)<<40)
			}
			if changed(cmd, "memory-limit") != "" && os.Getenv("GOMEMLIMIT") == "" {
				debug.SetMemoryLimit(extender.SoftMemoryLimit(memLimit))
			}
			ctx, stop := signalContext(cmd)
			defer stop()
			cfg := extender.ServeConfig{MaxBodyBytes: maxBody, MaxNodes: maxNodes, MemoryLimit: memLimit, TrackPods: trackPods, MaxPods: maxPods,
				SyncTimeout: syncWait, Log: slog.New(slog.NewTextHandler(e.stderr, nil))}
			if e.JSON() {
				cfg.Log = slog.New(slog.NewJSONHandler(e.stderr, nil))
			}
			if useNRT || trackPods {
				c, err := kube.client()
				if err != nil {
					return err
				}
				cfg.Dynamic, cfg.Host = c.Dynamic, c.Host
				if useNRT {
					if cfg.NRT, err = nrtResource(ctx, &kube); err != nil {
						return fmt.Errorf("discovering NodeResourceTopology at %s: %w", c.Host, err)
					}
				}
			}
			cfg.Listen, cfg.OpsListen = extenderListeners(ctx, e, listen, metricsListen)
			return extender.Serve(ctx, cfg)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&listen, "listen", "127.0.0.1:18888", "address to listen on (port 0: any free port)")
	fl.StringVar(&metricsListen, "metrics-listen", "", "also serve only GET /healthz and GET /metrics on this address (e.g. :18889 for probes and Prometheus while --listen stays on loopback)")
	fl.Int64Var(&maxBody, "max-body-bytes", extender.DefaultMaxBodyBytes, "largest request body accepted")
	fl.Int64Var(&memLimit, "memory-limit", extender.DefaultMemoryLimit, "bytes of memory the extender may use (the container's limit): its node view's decoded states, the bodies in flight (at most a quarter; --max-body-bytes is lowered to it) and, when given, the Go soft memory limit (90%, unless GOMEMLIMIT is set) fit in it")
	fl.IntVar(&maxNodes, "max-nodes", extender.DefaultMaxNodes, "most nodes in one request (with --nrt also the most NodeResourceTopology objects kept)")
	fl.BoolVar(&useNRT, "nrt", false, "also judge nodes without corepin annotations by their NodeResourceTopology objects")
	fl.BoolVar(&trackPods, "track-pods", false, "count the pods bound to a node and not yet admitted by its NRI plugin on that node's CPUs (nodes whose corepin.io/allocator says pod_uids)")
	fl.IntVar(&maxPods, "max-pods", extender.DefaultMaxPods, "with --track-pods: most bound pods kept")
	fl.StringVar(&kube.kubeconfig, "kubeconfig", "", "with --nrt or --track-pods: kubeconfig file (default $KUBECONFIG, else ~/.kube/config, else the in-cluster service account)")
	fl.StringVar(&kube.context, "context", "", "with --nrt or --track-pods: kubeconfig context (default its current context)")
	fl.DurationVar(&syncWait, "nrt-sync-timeout", 2*time.Minute, "with --nrt or --track-pods: exit 1 if the NodeResourceTopology objects or the pods are not listed within this time (/healthz answers 503 until they are)")
	return cmd
}

// nrtResource asks the API server of kube which NodeResourceTopology
// version to watch (extender.NRTResourceOf).
func nrtResource(ctx context.Context, kube *kubeFlags) (schema.GroupVersionResource, error) {
	host, hc, err := kubeclient.HTTP(kubeclient.Options{Kubeconfig: kube.kubeconfig, Context: kube.context, UserAgent: "corepin/" + Version})
	if err != nil {
		return schema.GroupVersionResource{}, err
	}
	dctx, cancel := context.WithTimeout(ctx, kubeclient.Timeout)
	defer cancel()
	return extender.NRTResourceOf(extender.HTTPDiscoverer{Ctx: dctx, Host: host, Client: hc})
}

// extenderListeners returns the extender's listener and, with
// --metrics-listen, the ops one. The ops listener is bound first, so the
// announced line names both addresses (port 0 works for either) and a
// busy --metrics-listen fails before anything is announced.
func extenderListeners(ctx context.Context, e *env, listen, metricsListen string) (main, ops func() (net.Listener, error)) {
	var opsLn net.Listener
	main = func() (net.Listener, error) {
		if metricsListen != "" {
			ln, err := net.Listen("tcp", metricsListen)
			if err != nil {
				return nil, Usagef("--metrics-listen %s: %v", metricsListen, err)
			}
			opsLn = ln
		}
		ln, err := listenAndAnnounce(ctx, e, listen, func(addr string) any {
			a := struct {
				Listen        string `json:"listen"`
				MetricsListen string `json:"metrics_listen,omitempty"`
			}{Listen: addr}
			if opsLn != nil {
				a.MetricsListen = opsLn.Addr().String()
			}
			return a
		})
		if err != nil && opsLn != nil {
			opsLn.Close()
		}
		return ln, err
	}
	if metricsListen != "" {
		ops = func() (net.Listener, error) { return opsLn, nil }
	}
	return main, ops
}
