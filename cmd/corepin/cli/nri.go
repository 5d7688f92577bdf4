package cli

import (
	"context"
	"log/slog"
	"os"

	"github.com/containerd/nri/pkg/stub"
	"github.com/spf13/cobra"

	"github.com/corepin/corepin/agent"
	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/kube/kubeclient"
	"github.com/corepin/corepin/kube/nodestate"
	"github.com/corepin/corepin/kube/nri"
	"github.com/corepin/corepin/kube/publish"
	"github.com/corepin/corepin/wakescan"
)

const nriUsage = `Run corepin as an NRI plugin (name "corepin", index 10) of containerd or
CRI-O: every container of every pod is admitted through the agent's state
file and allocator (the same --config as corepin agent: reserved_cpus,
policy, policy_options, topology_policy) and the runtime applies the
answer: cpuset cpus and mems, CPU shares, the LS quota, the BE pool at the
lowest weight. UpdateContainer keeps the pin; stop and remove release it;
every (re)connect resynchronises without moving correct containers. The
plugin reconnects by itself when the runtime restarts. It writes no cgroup
but its idle parent (--be-idle-parent).

A BE container's tasks are SCHED_IDLE (a waking task of any other pod
preempts them at once): the plugin asks the runtime for it (runc >= 1.2
applies it), and where the runtime did not, sets it on the container's
process before its command runs (this needs the host's PID namespace, and
CAP_SYS_NICE for containers of another user); otherwise the container
keeps the lowest weight. With --be-idle-parent the plugin instead creates
BE containers under kubepods/corepin-be, a group with cpu.idle 1 of its
own beside the pods (the kubelet's cgroupfs driver; the plugin writes
only that group and removes its pods' groups there): there the BE pods
meet the other pods as one idle entity, as corepin run --qos BE does on a
host. --metrics-addr serves which route each took
(corepin_nri_be_protection); corepin ctl top shows it per container.

Pods choose with the label koordinator.sh/qosClass (LSE|LSR|LS|BE) and the
annotation scheduling.koordinator.sh/resource-spec
('{"preferredCPUBindPolicy":"FullPCPUs","preferredCPUExclusivePolicy":"PCPULevel"}');
otherwise the kubelet's QoS decides (Guaranteed with whole CPUs: LSE).
NRI is fail-open: a pod annotated required-plugins.noderesource.dev:
'["corepin"]' is refused while the plugin is away (containerd's
default_validator must be enabled; see deploy/kubernetes/containerd-nri.toml).

With --irq-isolate pod, an exclusive (LSE, LSR) container of a pod
annotated corepin.io/irq-isolate: "true" is admitted with its CPUs to be
kept clear of movable device interrupts (with exclusive, every exclusive
container but those annotated "false"); the plugin records it in the
state file and writes no /proc/irq: corepin irq sync, beside it with the
host's /proc/irq writable, steers the interrupts (docs/reference/irq.md).
An LS or BE pod annotated "true" is refused with the reason.

With --publish-nrt (in a pod) it keeps a NodeResourceTopology object
(topology.node.k8s.io/v1alpha2, named after --node-name) up to date with the
free CPUs of each NUMA node and the attributes topologyManagerPolicy,
corepin.io/policy and corepin.io/options; the CRD must be installed.

With --annotate-node (in a pod) it keeps the annotations corepin extender
reads on its own Node (named by --node-name; needs patch on nodes):
corepin.io/topology and corepin.io/assigned, or only corepin.io/numa-free
when the topology would pass 256 KiB, and always corepin.io/allocator (the
policy, policy_options and topology_policy the extender must judge with). Both publish after every
synchronisation and every admission or release, coalesced. In a pod they
use its service account; a plugin run on the host gives --kubeconfig (and
--context) instead.

Examples:
  corepin nri
  corepin nri --config /etc/corepin/agent.yaml --state /var/lib/corepin/agent.db
  corepin nri --nri-socket /run/containerd-test/nri.sock --sysfs-root /
  corepin nri --annotate-node --node-name "$NODE_NAME"
  corepin nri --metrics-addr 127.0.0.1:9465
  corepin nri --be-idle-parent /sys/fs/cgroup
  corepin nri --irq-isolate exclusive
  corepin nri --annotate-node --node-name node-1 --kubeconfig /etc/kubernetes/kubelet.conf`

func init() { register(newNRICmd) }

func newNRICmd(e *env) *cobra.Command {
	var state, config, socket, root, nodeName, infoDir, metricsAddr, idleMount, irqMode string
	var publishNRT, annotateNode bool
	var kube kubeclient.Options
	cmd := &cobra.Command{
		Use:   "nri",
		Short: "Run the NRI plugin (pins Kubernetes containers under containerd or CRI-O)",
		Long:  nriUsage,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			irqs, err := nri.ParseIRQMode(irqMode)
			if err != nil {
				return Usagef("--irq-isolate: %v", err)
			}
			c, err := loadAgentConfig(config)
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("state") || c.State == "" {
				c.State = state
			}
			ac, err := c.Settings()
			if err != nil {
				return Usagef("--config %s: %v", config, err)
			}
			topo, err := openTopology("--sysfs-root", root)
			if err != nil {
				return err
			}
			var h slog.Handler = slog.NewTextHandler(e.stderr, nil)
			if c.LogFormat == "json" {
				h = slog.NewJSONHandler(e.stderr, nil)
			}
			wake, _ := wakescan.ParseMode(c.WakeScan) // checked by loadAgentConfig
			o := nri.Options{State: c.State, Topology: topo, Alloc: ac, Logger: slog.New(h), InfoDir: infoDir, MetricsAddr: metricsAddr, IdleParentMount: idleMount,
				WakeScan: wake, SchedRoot: root, IRQIsolate: irqs}
			if err := nriPublishers(&o, kube, nodeName, publishNRT, annotateNode, ac, c.TopologyPolicy); err != nil {
				return err
			}
			p, err := nri.New(o)
			if isAgentUsage(err) {
				return &UsageError{Err: err}
			}
			if err != nil {
				return err
			}
			defer p.Close()
			ctx, cancel := signalContext(cmd)
			defer cancel()
			var opts []stub.Option
			if socket != "" {
				opts = append(opts, stub.WithSocketPath(socket))
			}
			return p.Run(ctx, opts...)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&state, "state", agent.DefaultState, "state file (SQLite), shared with corepin agent")
	fl.StringVar(&config, "config", "", "YAML config of corepin agent (reserved CPUs, policy, options, topology policy)")
	fl.StringVar(&socket, "nri-socket", "", "the runtime's NRI socket (default /var/run/nri/nri.sock)")
	fl.StringVar(&root, "sysfs-root", "/", "directory holding sys/ of the machine to place on")
	fl.StringVar(&infoDir, "info-dir", "", "host directory (seen by the plugin at the same path) of each container's files cpuset and threads, kept current across resizes and mounted read-only into the container at "+nri.InfoMount+" (empty: none; the variables COREPIN_CPUSET and COREPIN_THREADS are set either way)")
	fl.StringVar(&metricsAddr, "metrics-addr", "", "TCP address to serve Prometheus metrics on (GET /metrics: corepin_nri_be_protection, the BE containers by route); empty: none")
	fl.StringVar(&idleMount, "be-idle-parent", "", "the host's cgroup mount (its /sys/fs/cgroup as the plugin sees it, writable) where BE containers are created under kubepods/"+nri.IdleGroup+", a group with cpu.idle 1 the plugin keeps (cgroupfs driver, cgroup v1 or v2); empty: none, BE containers stay in the kubelet's besteffort group")
	fl.StringVar(&irqMode, "irq-isolate", string(nri.IRQOff), "which exclusive (LSE, LSR) containers get their CPUs kept clear of device interrupts: off, pod (those of pods annotated "+nri.AnnotationIRQIsolate+": \"true\") or exclusive (all but those annotated \"false\"); corepin irq sync does the steering")
	fl.BoolVar(&publishNRT, "publish-nrt", false, "publish the node's free CPUs per NUMA node as a NodeResourceTopology (in a pod, with its service account)")
	fl.BoolVar(&annotateNode, "annotate-node", false, "publish the node's topology and assignments as the annotations corepin extender reads (in a pod, with its service account)")
	fl.StringVar(&nodeName, "node-name", os.Getenv("NODE_NAME"), "this node's name, for --publish-nrt and --annotate-node")
	fl.StringVar(&kube.Kubeconfig, "kubeconfig", "", "kubeconfig for --publish-nrt and --annotate-node from outside a pod (default: the pod's service account)")
	fl.StringVar(&kube.Context, "context", "", "the kubeconfig context (default: its current one)")
	return cmd
}

// publisher is the API client of --publish-nrt and --annotate-node
// (client-go's, rate limited and retrying): the pod's service account,
// whose projected token it re-reads as the kubelet rotates it, or the
// kubeconfig given (a plugin run on the host).
func publisher(o kubeclient.Options) (*publish.Publisher, error) {
	ua := "corepin-nri/" + Version
	if o.Kubeconfig == "" && o.Context == "" {
		return publish.InCluster(ua)
	}
	o.UserAgent = ua
	cfg, err := kubeclient.Config(o)
	if err != nil {
		return nil, err
	}
	return publish.New(cfg)
}

// nriPublishers sets o's publishers of the node's state for --publish-nrt
// and --annotate-node.
func nriPublishers(o *nri.Options, kube kubeclient.Options, nodeName string, publishNRT, annotateNode bool, ac alloc.NodeSettings, policy string) error {
	if publishNRT {
		if nodeName == "" {
			return Usagef("--publish-nrt needs --node-name (or $NODE_NAME): the object is named after the node")
		}
		pub, err := publisher(kube)
		if err != nil {
			return Usagef("--publish-nrt: %v", err)
		}
		set := ac
		set.TopologyPolicy = alloc.TopologyPolicy(policy)
		settings, topo := nodestate.AllocatorOf(set), o.Topology
		o.Publish = func(ctx context.Context, pools alloc.Pools) error {
			return pub.Publish(ctx, nodestate.BuildNRTWith(nodeName, topo, pools, settings))
		}
	}
	if annotateNode {
		if nodeName == "" {
			return Usagef("--annotate-node needs --node-name (or $NODE_NAME): the node to annotate")
		}
		pub, err := publisher(kube)
		if err != nil {
			return Usagef("--annotate-node: %v", err)
		}
		o.Annotate = (&publish.Annotator{Publisher: pub, Node: nodeName, TopologyPolicy: alloc.TopologyPolicy(policy), Log: o.Logger}).Annotate
	}
	return nil
}
