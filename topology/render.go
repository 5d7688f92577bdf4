package topology

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/corepin/corepin/cpuset"
)

// Doc is the `corepin topo -o json` document (design.md, public contracts).
// Keys beyond the contract (cluster, warnings) only extend it.
type Doc struct {
	CPUs          []CPU            `json:"cpus"`
	NUMADistances map[NodeID][]int `json:"numa_distances"`
	// Isolated are the CPUs isolated from general scheduling (isolcpus,
	// isolated cgroup partitions) and NohzFull those without the periodic
	// tick, in list format; both are left out where there are none.
	Isolated string   `json:"isolated,omitempty"`
	NohzFull string   `json:"nohz_full,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
}

// Doc returns the JSON document of t. Every NUMA node gets a distance row,
// in the order of Nodes; a machine without a table gets the default one.
func (t *Topology) Doc() Doc {
	d := Doc{CPUs: t.CPUs(), NUMADistances: map[NodeID][]int{}, Warnings: t.Warnings,
		Isolated: t.Isolated().String(), NohzFull: t.NohzFull().String()}
	for _, a := range t.nodes {
		row := make([]int, len(t.nodes))
		for j, b := range t.nodes {
			row[j] = t.Distance(a, b)
		}
		d.NUMADistances[a] = row
	}
	return d
}

// FromDoc builds a Topology from its JSON document, validating it (see New).
func FromDoc(d Doc) (*Topology, error) {
	t, err := New(d.CPUs, d.NUMADistances)
	if err != nil {
		return nil, err
	}
	if t, err = withDocIsolation(t, d.Isolated, d.NohzFull); err != nil {
		return nil, err
	}
	t.Warnings = d.Warnings
	return t, nil
}

// withDocIsolation sets the "isolated" and "nohz_full" of a document on t
// (isolated taken as isolcpus: a document does not say which source).
func withDocIsolation(t *Topology, isolated, nohzFull string) (*Topology, error) {
	if isolated == "" && nohzFull == "" {
		return t, nil
	}
	var iso Isolation
	for _, f := range []struct {
		key, s string
		set    *cpuset.CPUSet
	}{{"isolated", isolated, &iso.Isolcpus}, {"nohz_full", nohzFull, &iso.NohzFull}} {
		set, err := cpuset.Parse(f.s)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrInvalid, f.key, err)
		}
		*f.set = set
	}
	return t.WithIsolation(iso)
}

// Summary is the one-line description of the machine, e.g.
// "2 packages, 4 NUMA nodes, 8 L3, 64 cores, 128 CPUs (SMT2)".
func (t *Topology) Summary() string {
	var parts []string
	parts = append(parts, plural(t.NumSockets(), "package", "packages"))
	if t.NumDies() > t.NumSockets() {
		parts = append(parts, plural(t.NumDies(), "die", "dies"))
	}
	parts = append(parts, plural(len(t.nodeCPUs), "NUMA node", "NUMA nodes"))
	if memOnly := len(t.nodes) - len(t.nodeCPUs); memOnly > 0 {
		parts[len(parts)-1] += fmt.Sprintf(" (+%d without CPUs)", memOnly)
	}
	if n := t.noNode.Size(); n > 0 {
		parts[len(parts)-1] += fmt.Sprintf(" (%s in none)", plural(n, "CPU", "CPUs"))
	}
	if t.NumL3() == 0 {
		parts = append(parts, "no L3")
	} else {
		parts = append(parts, fmt.Sprintf("%d L3", t.NumL3()))
	}
	parts = append(parts, plural(t.NumCores(), "core", "cores"))
	smt := "no SMT"
	if n := t.ThreadsPerCore(); n > 1 {
		smt = fmt.Sprintf("SMT%d", n)
	}
	s := strings.Join(parts, ", ") + ", " + plural(t.online.Size(), "CPU", "CPUs") + " (" + smt + ")"
	if off := t.present.Difference(t.online).Size(); off > 0 {
		s += fmt.Sprintf(", %d offline", off)
	}
	if kinds := t.kindCounts(); len(kinds) > 1 {
		s += ", hybrid: " + strings.Join(kinds, " + ")
	}
	return s
}

func (t *Topology) kindCounts() []string {
	counts := map[string]int{}
	var order []string
	for _, c := range t.cpus {
		if !c.Online || c.Kind == "" {
			continue
		}
		if counts[c.Kind] == 0 {
			order = append(order, c.Kind)
		}
		counts[c.Kind]++
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, fmt.Sprintf("%d %s CPUs", counts[k], strings.TrimSuffix(kindLabel(k), "s")))
	}
	return out
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// RenderOptions tunes Render.
type RenderOptions struct {
	// Width wraps core lists; 0 means 100 columns.
	Width int
	// Mark returns a tag to show after a CPU (a workload name, say), or "".
	Mark func(cpu int) string
	// OmitWarnings leaves out the "warning:" lines, for a caller that
	// prints Topology.Warnings itself (corepin topo, on stderr).
	OmitWarnings bool
}

// Render writes an lstopo-like view: package -> NUMA node -> L3 -> physical
// cores, each shown as its SMT sibling CPUs joined by "+"; CPUs in no NUMA
// node are under "(no NUMA node)" in their package. CPUs outside corepin's cpuset cgroup carry a "!" and
// offline CPUs are listed at the end.
func (t *Topology) Render(w io.Writer, o RenderOptions) error {
	if o.Width == 0 {
		o.Width = 100
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Machine: %s\n", t.Summary())
	for s := range t.socketCPUs {
		sock := t.socketCPUs[s]
		fmt.Fprintf(&b, "Package %d  cpus %s\n", s, sock)
		for _, n := range append(t.NodesWithCPUs(), None) {
			nodeSet := t.nodeCPUs[n]
			label := fmt.Sprintf("NUMA node %d", n)
			if n == None {
				nodeSet, label = t.noNode, "(no NUMA node)"
			}
			nodeSet = nodeSet.Intersection(sock)
			if nodeSet.IsEmpty() {
				continue
			}
			fmt.Fprintf(&b, "  %s  cpus %s\n", label, nodeSet)
			var l3s []int
			for i, l := range t.l3CPUs {
				if l.Intersects(nodeSet) {
					l3s = append(l3s, i)
				}
			}
			if len(l3s) == 0 {
				t.renderCores(&b, "    ", nodeSet, o)
				continue
			}
			for _, i := range l3s {
				set := t.l3CPUs[i].Intersection(nodeSet)
				fmt.Fprintf(&b, "    L3 %d  cpus %s\n", i, set)
				t.renderCores(&b, "      ", set, o)
			}
			var noL3 cpuset.Builder
			for cpu := range nodeSet.All() {
				if c := t.cpus[t.byID[cpu]]; c.L3 == None {
					noL3.Add(cpu)
				}
			}
			if rest := noL3.Result(); !rest.IsEmpty() {
				fmt.Fprintf(&b, "    (no L3)  cpus %s\n", rest)
				t.renderCores(&b, "      ", rest, o)
			}
		}
	}
	if off := t.present.Difference(t.online); !off.IsEmpty() {
		fmt.Fprintf(&b, "Offline: %s\n", off)
	}
	if line := t.isolationLine(); line != "" {
		b.WriteString(line + "\n")
	}
	if dis := t.online.Difference(t.allowed); !dis.IsEmpty() {
		fmt.Fprintf(&b, "Not allowed (outside corepin's cpuset cgroup, marked !): %s\n", dis)
	}
	if len(t.nodes) > 1 {
		b.WriteString("NUMA distances:\n      ")
		for _, n := range t.nodes {
			fmt.Fprintf(&b, "%5d", n)
		}
		b.WriteByte('\n')
		for _, a := range t.nodes {
			fmt.Fprintf(&b, "  %3d ", a)
			for _, c := range t.nodes {
				fmt.Fprintf(&b, "%5d", t.Distance(a, c))
			}
			b.WriteByte('\n')
		}
	}
	if !o.OmitWarnings {
		for _, w := range t.Warnings {
			fmt.Fprintf(&b, "warning: %s\n", w)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// isolationLine is the text view's line of isolated CPUs, e.g.
// "Isolated: 6-7 (isolcpus), nohz_full: 6-7", or "" on a machine without.
func (t *Topology) isolationLine() string {
	iso := t.isolation
	var parts []string
	if all := t.Isolated(); !all.IsEmpty() {
		var src []string
		switch {
		case iso.Partitions.IsEmpty():
			src = append(src, "isolcpus")
		case iso.Isolcpus.IsEmpty():
			src = append(src, "cgroup isolated partition")
		default:
			src = append(src, "isolcpus "+iso.Isolcpus.String(), "cgroup isolated partition "+iso.Partitions.String())
		}
		parts = append(parts, fmt.Sprintf("isolated: %s (%s)", all, strings.Join(src, "; ")))
	}
	if !iso.NohzFull.IsEmpty() {
		parts = append(parts, "nohz_full: "+iso.NohzFull.String())
	}
	if len(parts) == 0 {
		return ""
	}
	line := strings.Join(parts, ", ")
	return strings.ToUpper(line[:1]) + line[1:]
}

// kindLabel is the text name of a hybrid kind.
func kindLabel(k string) string {
	switch k {
	case KindCore:
		return "P-cores"
	case KindAtom:
		return "E-cores"
	case "":
		return ""
	}
	return k + " cores"
}

// renderCores writes the physical cores within set, several to a line: the
// SMT siblings of a core joined by "+" (0+64), one line group per hybrid
// kind.
func (t *Topology) renderCores(b *strings.Builder, indent string, set cpuset.CPUSet, o RenderOptions) {
	var cores []int
	for cpu := range set.All() {
		c := t.cpus[t.byID[cpu]]
		if !slices.Contains(cores, int(c.Core)) {
			cores = append(cores, int(c.Core))
		}
	}
	slices.Sort(cores)
	byKind := map[string][]string{}
	var kinds []string
	for _, core := range cores {
		var cpus []string
		kind := ""
		for cpu := range t.coreCPUs[core].Intersection(set).All() {
			c := t.cpus[t.byID[cpu]]
			s := fmt.Sprint(cpu)
			if !c.Allowed {
				s += "!"
			}
			if o.Mark != nil {
				if m := o.Mark(cpu); m != "" {
					s += "[" + m + "]"
				}
			}
			cpus = append(cpus, s)
			kind = c.Kind
		}
		if _, ok := byKind[kind]; !ok {
			kinds = append(kinds, kind)
		}
		byKind[kind] = append(byKind[kind], strings.Join(cpus, "+"))
	}
	for _, k := range kinds {
		prefix := indent + "cores: "
		if k != "" {
			prefix = indent + kindLabel(k) + ": "
		}
		line := prefix
		for _, item := range byKind[k] {
			if len(line) > len(prefix) && len(line)+1+len(item) > o.Width {
				b.WriteString(line + "\n")
				line = strings.Repeat(" ", len(prefix))
			}
			if !strings.HasSuffix(line, " ") {
				line += " "
			}
			line += item
		}
		b.WriteString(line + "\n")
	}
}
