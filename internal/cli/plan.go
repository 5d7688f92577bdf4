package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
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
			in, err := io.ReadAll(e.stdin)
			if err != nil {
				return fmt.Errorf("reading stdin: %w", err)
			}
			out, view, err := runPlan(in, discoverLive)
			if err != nil {
				return err
			}
			printWarnings(e.stderr, view.state.Topology())
			if e.JSON() {
				return e.PrintJSON(out)
			}
			return renderPlan(e.stdout, view, out)
		},
	}
}

type planTopology struct {
	SysfsRoot     string           `json:"sysfs_root"`
	CPUs          []topology.CPU   `json:"cpus"`
	NUMADistances map[string][]int `json:"numa_distances"`
}

type planAssigned struct {
	ID        string   `json:"id"`
	CPUSet    string   `json:"cpuset"`
	QoS       string   `json:"qos"`
	Exclusive string   `json:"exclusive"`
	CPUs      *float64 `json:"cpus"` // quota of an LS or BE workload
}

// planRequest is a request object of the plan contract.
type planRequest = alloc.RequestSpec

type planInput struct {
	Topology  *planTopology  `json:"topology"`
	Reserved  string         `json:"reserved"`
	Available *string        `json:"available"`
	Assigned  []planAssigned `json:"assigned"`
	Policy    string         `json:"policy"`
	Options   []string       `json:"options"`
	Requests  []planRequest  `json:"requests"`
}

type planResult struct {
	ID        string         `json:"id"`
	CPUSet    *string        `json:"cpuset,omitempty"`
	NUMANodes *string        `json:"numa_nodes,omitempty"`
	Quality   *alloc.Quality `json:"quality,omitempty"`
	Error     string         `json:"error,omitempty"`
}

type planOutput struct {
	Results []planResult `json:"results"`
}

// planView is what the text renderer needs besides the output.
type planView struct {
	state  *alloc.State
	before map[int]string // cpu -> mark for what was held before the plan
	marks  map[int]rune   // cpu -> letter of the new placement
	legend []string
}

// discoverLive reads this machine's topology.
func discoverLive() (*topology.Topology, error) { return openTopology("", "/") }

// runPlan decodes a plan document and places its requests. Bad input is a
// UsageError; a request the machine cannot take is a per-request error.
func runPlan(data []byte, live func() (*topology.Topology, error)) (planOutput, *planView, error) {
	var in planInput
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return planOutput{}, nil, Usagef("parsing plan input: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return planOutput{}, nil, Usagef("parsing plan input: more than one JSON document on stdin")
	}
	topo, err := planTopo(in.Topology, live)
	if err != nil {
		return planOutput{}, nil, err
	}
	reserved, err := parseSet("reserved", in.Reserved)
	if err != nil {
		return planOutput{}, nil, err
	}
	cfg := alloc.Config{Policy: alloc.Policy(in.Policy), Options: in.Options, Reserved: reserved}
	st, err := alloc.NewState(topo, cfg)
	if err != nil {
		return planOutput{}, nil, Usagef("%v", err)
	}
	view := &planView{state: st, before: map[int]string{}, marks: map[int]rune{}}
	if in.Available != nil && in.Assigned != nil {
		return planOutput{}, nil, Usagef("give either \"available\" or \"assigned\", not both")
	}
	if in.Available != nil {
		avail, err := parseSet("available", *in.Available)
		if err != nil {
			return planOutput{}, nil, err
		}
		if !avail.IsSubsetOf(topo.Online()) {
			return planOutput{}, nil, Usagef("available cpus %s are not all online (online: %s)", avail.Difference(topo.Online()), topo.Online())
		}
		busy := topo.Allowed().Difference(avail).Difference(st.Reserved())
		if !busy.IsEmpty() {
			if err := st.Assign(alloc.Assignment{ID: "(unavailable)", QoS: alloc.LSE, CPUs: busy}); err != nil {
				return planOutput{}, nil, Usagef("%v", err)
			}
			for c := range busy.All() {
				view.before[c] = "#"
			}
		}
	}
	for _, a := range in.Assigned {
		set, err := parseSet("assigned cpuset of "+strconv.Quote(a.ID), a.CPUSet)
		if err != nil {
			return planOutput{}, nil, err
		}
		as := alloc.Assignment{ID: a.ID, CPUs: set, QoS: alloc.QoS(a.QoS), Exclusive: alloc.Exclusive(a.Exclusive)}
		if a.CPUs != nil {
			if as.MilliCPUs, err = alloc.MilliCPUs(a.ID, *a.CPUs); err != nil {
				return planOutput{}, nil, &UsageError{Err: err}
			}
		}
		if err := st.Assign(as); err != nil {
			return planOutput{}, nil, Usagef("%v", err)
		}
		if as.QoS == "" || as.QoS == alloc.LSE || as.QoS == alloc.LSR {
			for c := range set.All() {
				view.before[c] = "#"
			}
		}
	}
	out := planOutput{Results: []planResult{}}
	seen := map[string]bool{}
	for i, pr := range in.Requests {
		req, err := toRequest(i, pr)
		if err != nil {
			return planOutput{}, nil, err
		}
		if seen[req.ID] {
			return planOutput{}, nil, Usagef("request id %q appears twice", req.ID)
		}
		seen[req.ID] = true
		p, err := st.Allocate(req)
		if errors.Is(err, alloc.ErrRejected) {
			out.Results = append(out.Results, planResult{ID: req.ID, Error: err.Error()})
			continue
		}
		if err != nil {
			return planOutput{}, nil, Usagef("%v", err)
		}
		set, nodes, q := p.CPUs.String(), p.NUMANodes.String(), p.Quality
		out.Results = append(out.Results, planResult{ID: req.ID, CPUSet: &set, NUMANodes: &nodes, Quality: &q})
		if req.QoS == alloc.LSE || req.QoS == alloc.LSR || req.QoS == "" {
			letter := rune('A' + len(view.legend)%26)
			for c := range p.CPUs.All() {
				view.marks[c] = letter
			}
			view.legend = append(view.legend, fmt.Sprintf("%c %s", letter, req.ID))
		}
	}
	return out, view, nil
}

func planTopo(pt *planTopology, live func() (*topology.Topology, error)) (*topology.Topology, error) {
	switch {
	case pt == nil || (pt.SysfsRoot == "" && pt.CPUs == nil):
		if pt != nil && pt.NUMADistances != nil {
			return nil, Usagef("topology has numa_distances but no cpus")
		}
		return live()
	case pt.SysfsRoot != "" && pt.CPUs != nil:
		return nil, Usagef("topology: give either sysfs_root or cpus, not both")
	case pt.SysfsRoot != "":
		return openTopology("topology.sysfs_root", pt.SysfsRoot)
	}
	t, err := topology.FromCPUs(pt.CPUs, pt.NUMADistances)
	if err != nil {
		return nil, Usagef("topology: %w", err)
	}
	return t, nil
}

func parseSet(what, s string) (cpuset.CPUSet, error) {
	set, err := cpuset.Parse(s)
	if err != nil {
		return cpuset.CPUSet{}, Usagef("%s: %v", what, err)
	}
	return set, nil
}

func toRequest(i int, pr planRequest) (alloc.Request, error) {
	if pr.ID == "" {
		return alloc.Request{}, Usagef("request %d has no id", i)
	}
	r, err := pr.Request(pr.ID)
	if err != nil {
		return alloc.Request{}, &UsageError{Err: err}
	}
	return r, nil
}

// renderPlan draws each NUMA node's L3 groups and cores, marking the CPUs
// of each new placement with its letter: "." free, "r" reserved, "#" held
// before the plan, "-" offline or not allowed.
func renderPlan(w io.Writer, v *planView, out planOutput) error {
	var sb strings.Builder
	for _, r := range out.Results {
		if r.Error != "" {
			fmt.Fprintf(&sb, "%-12s error: %s\n", r.ID, r.Error)
			continue
		}
		q := r.Quality
		fmt.Fprintf(&sb, "%-12s cpus %-14s numa %-6s (nodes %d, sockets %d, l3 %d, shared cores %d)\n",
			r.ID, *r.CPUSet, *r.NUMANodes, q.NUMANodes, q.Sockets, q.L3Groups, q.SharedCores)
	}
	t := v.state.Topology()
	reserved := v.state.Reserved()
	frag := v.state.Fragmentation()
	fmt.Fprintf(&sb, "\nleft free: %d whole cores, %d whole L3 groups, %d whole NUMA nodes\n",
		frag.FreeCores, frag.FreeL3Groups, frag.FreeNUMANodes)
	if len(v.legend) > 0 {
		fmt.Fprintf(&sb, "legend: %s; . free, r reserved, # held before, - offline or not allowed\n", strings.Join(v.legend, ", "))
	}
	cpus := t.CPUs()
	mark := func(c topology.CPU) string {
		switch {
		case v.marks[c.ID] != 0:
			return string(v.marks[c.ID])
		case !c.Online || !c.Allowed:
			return "-"
		case reserved.Contains(c.ID):
			return "r"
		case v.before[c.ID] != "":
			return v.before[c.ID]
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
