package cli

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/plan"
	"github.com/corepin/corepin/topology"
)

const planUsage = `Reads one JSON document on stdin describing a machine, what is already
placed on it and a list of requests, and prints where each request goes.
Requests are placed in order, each seeing the ones before. Nothing on the
machine is changed.

Input:
  {"topology": {"sysfs_root": "DIR"},          or {"cpus": [...], "numa_distances": {...}}
                                               (the corepin topo -o json form); omitted: this machine
   "reserved": "0",                            CPUs kept for the system
   "available": "1-15",                        or "assigned": [{"id": "x", "cpuset": "2-5", "qos": "LSE"}]
   "policy": "corepin",                        corepin (default) or kubelet
   "options": ["full-pcpus-only"],             kubelet static-policy option names
   "requests": [{"id": "enc-1", "cpus": 4, "qos": "LSE", "bind": "FullPCPUs",
                 "exclusive": "PCPULevel", "numa": "MostAllocated",
                 "topology_policy": "restricted"}]}

Output (-o json):
  {"results": [{"id": "enc-1", "cpuset": "2-5", "numa_nodes": "0",
                "quality": {"numa_nodes": 1, "sockets": 1, "l3_groups": 1, "shared_cores": 0,
                            "free_cores": 6, "free_l3_groups": 1, "free_numa_nodes": 1}}]}
  A request that cannot be placed gets {"id": "...", "error": "<reason>"}.
  -o text draws the topology with the new placements marked.`

const planExamples = `  # Where would two 4-CPU encoders go on this machine?
  echo '{"requests": [{"id": "a", "cpus": 4}, {"id": "b", "cpus": 4}]}' | corepin plan

  # Compare with kubelet's static policy on a saved machine dump
  echo '{"topology": {"sysfs_root": "dump"}, "policy": "kubelet", "options": ["full-pcpus-only"],
         "reserved": "0-1", "requests": [{"id": "pod", "cpus": 6}]}' | corepin plan -o json`

func init() { register(newPlanCmd) }

func newPlanCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:     "plan",
		Short:   "Decide CPU placements for a list of requests, without changing anything",
		Long:    planUsage,
		Example: planExamples,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := runPlan(e.stdin, loadPlanTopology)
			if err != nil {
				return err
			}
			printWarnings(e.stderr, p.State.Topology())
			if e.JSON() {
				return e.PrintJSON(p.Output)
			}
			return renderPlan(e.stdout, p)
		},
	}
}

// loadPlanTopology reads this machine ("") or a sysfs dump, through the
// one loader every command uses.
func loadPlanTopology(root string) (*topology.Topology, error) {
	if root == "" {
		root = "/"
	}
	return topology.Open(root)
}

// runPlan decodes and places a plan document. A document that is wrong as
// written is a UsageError (exit 2), with its error chain kept.
func runPlan(r io.Reader, load plan.Loader) (*plan.Plan, error) {
	d, err := plan.Decode(r)
	if err == nil {
		var p *plan.Plan
		if p, err = d.Place(load); err == nil {
			return p, nil
		}
	}
	if errors.Is(err, plan.ErrInvalid) {
		return nil, &UsageError{Err: err}
	}
	return nil, err
}

// renderPlan draws each NUMA node's L3 groups and cores, marking the CPUs
// of each new placement with its letter: "." free, "r" reserved, "#" held
// before the plan, "-" offline or not allowed.
func renderPlan(w io.Writer, p *plan.Plan) error {
	var sb strings.Builder
	for _, r := range p.Output.Results {
		if r.Error != "" {
			fmt.Fprintf(&sb, "%-12s error: %s\n", r.ID, r.Error)
			continue
		}
		q := r.Quality
		fmt.Fprintf(&sb, "%-12s cpus %-14s numa %-6s (nodes %d, sockets %d, l3 %d, shared cores %d)\n",
			r.ID, *r.CPUSet, *r.NUMANodes, q.NUMANodes, q.Sockets, q.L3Groups, q.SharedCores)
	}
	marks := map[int]rune{}
	var legend []string
	for i, pl := range p.Exclusive {
		letter := rune('A' + i%26)
		for c := range pl.CPUs.All() {
			marks[c] = letter
		}
		legend = append(legend, fmt.Sprintf("%c %s", letter, pl.ID))
	}
	t := p.State.Topology()
	reserved := p.State.Reserved()
	frag := p.State.Fragmentation()
	fmt.Fprintf(&sb, "\nleft free: %d whole cores, %d whole L3 groups, %d whole NUMA nodes\n",
		frag.FreeCores, frag.FreeL3Groups, frag.FreeNUMANodes)
	if len(legend) > 0 {
		fmt.Fprintf(&sb, "legend: %s; . free, r reserved, # held before, - offline or not allowed\n", strings.Join(legend, ", "))
	}
	cpus := t.CPUs()
	mark := func(c topology.CPU) string {
		switch {
		case marks[c.ID] != 0:
			return string(marks[c.ID])
		case !c.Online || !c.Allowed:
			return "-"
		case reserved.Contains(c.ID):
			return "r"
		case p.Held.Contains(c.ID):
			return "#"
		}
		return "."
	}
	for _, node := range t.NodesWithCPUs() {
		var l3s []topology.CacheID
		for _, c := range cpus {
			if c.Online && c.NUMA == node && !slices.Contains(l3s, c.L3) {
				l3s = append(l3s, c.L3)
			}
		}
		var socks cpuset.Builder // a node can span sockets (and a socket nodes)
		for _, c := range cpus {
			if c.Online && c.NUMA == node {
				socks.Add(int(c.Socket))
			}
		}
		label := "socket"
		if s := socks.Result(); s.Size() > 1 {
			label = "sockets"
		}
		fmt.Fprintf(&sb, "\nnuma %d (%s %s)\n", node, label, socks.Result())
		for _, l3 := range l3s {
			name := fmt.Sprintf("l3 %d", l3)
			if l3 == topology.None {
				name = "no l3"
			}
			fmt.Fprintf(&sb, "  %-6s", name)
			var cores []topology.CoreID
			for _, c := range cpus {
				if c.Online && c.NUMA == node && c.L3 == l3 && !slices.Contains(cores, c.Core) {
					cores = append(cores, c.Core)
				}
			}
			for _, core := range cores {
				sb.WriteString(" [")
				first := true
				for id := range t.CoreCPUs(core).All() {
					c, _ := t.CPU(id)
					if !first {
						sb.WriteByte(' ')
					}
					first = false
					fmt.Fprintf(&sb, "%d%s", id, mark(c))
				}
				sb.WriteString("]")
			}
			sb.WriteByte('\n')
		}
	}
	_, err := io.WriteString(w, sb.String())
	return err
}
