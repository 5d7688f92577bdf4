package topology

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/internal/testutil"
)

// hwlocView is hwloc's reading of a machine, parsed from lstopo's console
// output (the fixtures' .console files): which PUs (logical CPUs) share a
// package, a core, an L3 and a NUMA node.
type hwlocView struct {
	packages, cores, l3s, clusters []cpuset.CPUSet
	nodes                          map[int]cpuset.CPUSet // by OS index (P#)
	pus                            cpuset.CPUSet
	offline                        cpuset.CPUSet // "processors not represented"
}

var (
	objLine = regexp.MustCompile(`^( *)(Machine|Package|NUMANode|L3Cache|Core|PU|Group\(Cluster\)|Die|L[0-9][a-z]*Cache|Group[0-9]*)(?: L#(\d+))?(?: \(P#(\d+))?(?:[ )]|$)`)
	notRepr = regexp.MustCompile(`^(\d+) processors not represented in topology: (0x[0-9a-f,x]+)`)
)

func parseHwlocConsole(t *testing.T, file string) hwlocView {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	type obj struct {
		indent int
		typ    string
		l      int
		p      int
		pus    cpuset.Builder
		nodes  []int // NUMANode children (P#)
	}
	var stack []*obj
	var all []*obj
	v := hwlocView{nodes: map[int]cpuset.CPUSet{}}
	var pus cpuset.Builder
	for line := range strings.SplitSeq(string(b), "\n") {
		if m := notRepr.FindStringSubmatch(line); m != nil {
			var mb cpuset.Builder
			// hwloc prints "0x00006024" or "0x...,0x..." words.
			words := strings.Split(strings.ReplaceAll(m[2], "0x", ""), ",")
			set, err := cpuset.ParseMask(strings.Join(words, ","))
			if err != nil {
				t.Fatalf("parsing %q: %v", line, err)
			}
			mb.AddSet(set)
			v.offline = mb.Result()
			continue
		}
		m := objLine.FindStringSubmatch(line)
		if m == nil || strings.HasPrefix(strings.TrimSpace(line), "depth") {
			continue
		}
		o := &obj{indent: len(m[1]), typ: m[2], l: -1, p: -1}
		if m[3] != "" {
			o.l, _ = strconv.Atoi(m[3])
		}
		if m[4] != "" {
			o.p, _ = strconv.Atoi(m[4])
		}
		for len(stack) > 0 && stack[len(stack)-1].indent >= o.indent {
			stack = stack[:len(stack)-1]
		}
		if o.typ == "NUMANode" {
			if len(stack) == 0 {
				t.Fatalf("%s: NUMANode without parent: %q", file, line)
			}
			parent := stack[len(stack)-1]
			parent.nodes = append(parent.nodes, o.p)
			continue
		}
		if o.typ == "PU" {
			for _, a := range stack {
				a.pus.Add(o.p)
			}
			pus.Add(o.p)
		}
		stack = append(stack, o)
		all = append(all, o)
	}
	v.pus = pus.Result()
	for _, o := range all {
		set := o.pus.Result()
		switch o.typ {
		case "Package":
			v.packages = append(v.packages, set)
		case "Core":
			v.cores = append(v.cores, set)
		case "L3Cache":
			v.l3s = append(v.l3s, set)
		case "Group(Cluster)":
			v.clusters = append(v.clusters, set)
		}
		if len(o.nodes) == 1 {
			v.nodes[o.nodes[0]] = set
		} else if len(o.nodes) > 1 {
			t.Logf("%s: %s L#%d holds %d NUMA nodes; their CPUs are not compared", file, o.typ, o.l, len(o.nodes))
		}
	}
	return v
}

// groups returns the partition of t's online CPUs by f, as sorted strings.
func groups(t *Topology, f func(CPU) int) []string {
	m := map[int]*cpuset.Builder{}
	for _, c := range t.CPUs() {
		if !c.Online {
			continue
		}
		k := f(c)
		if k == None {
			continue
		}
		if m[k] == nil {
			m[k] = &cpuset.Builder{}
		}
		m[k].Add(c.ID)
	}
	var out []string
	for _, b := range m {
		out = append(out, b.Result().String())
	}
	slices.Sort(out)
	return out
}

func setStrings(sets []cpuset.CPUSet) []string {
	out := make([]string, 0, len(sets))
	for _, s := range sets {
		out = append(out, s.String())
	}
	slices.Sort(out)
	return out
}

// bulldozer is the documented exception (design.md, Fixtures): on AMD
// Bulldozer the kernel reports each compute unit's two integer cores as
// thread siblings; corepin follows the kernel, hwloc splits them using
// /proc/cpuinfo. corepin's cores there are unions of exactly two of hwloc's.
const bulldozer = "64amd64-4s2n4ca2co"

// TestDiscoverMatchesHwloc checks, for every real machine dump, that the
// grouping of CPUs into packages, cores, L3 caches and NUMA nodes equals
// hwloc's own reading of that machine.
func TestDiscoverMatchesHwloc(t *testing.T) {
	for _, name := range testutil.Fixtures(t) {
		t.Run(name, func(t *testing.T) {
			fsys := testutil.SysfsFromTarBz2(t, name)
			topo, err := Discover(fsys)
			if err != nil {
				t.Fatalf("Discover: %v", err)
			}
			hw := parseHwlocConsole(t, filepath.Join(testutil.FixturesDir(t), name+".console"))
			if got, want := topo.Online().String(), hw.pus.String(); got != want {
				t.Errorf("online cpus = %q, hwloc PUs = %q", got, want)
			}
			if !hw.offline.IsEmpty() {
				if got := topo.Present().Difference(topo.Online()); !got.Equals(hw.offline) {
					t.Errorf("offline cpus = %q, hwloc not represented = %q", got, hw.offline)
				}
			}
			check := func(what string, got, want []string) {
				t.Helper()
				if !slices.Equal(got, want) {
					t.Errorf("%s groups:\n got %q\nwant %q", what, got, want)
				}
			}
			check("package", groups(topo, func(c CPU) int { return int(c.Socket) }), setStrings(hw.packages))
			check("l3", groups(topo, func(c CPU) int { return int(c.L3) }), setStrings(hw.l3s))
			if len(hw.clusters) > 0 {
				check("cluster", groups(topo, func(c CPU) int { return int(c.Cluster) }), setStrings(hw.clusters))
			}
			for node, want := range hw.nodes {
				if got := topo.NodeCPUs(NodeID(node)); !got.Equals(want) {
					t.Errorf("numa node %d cpus = %q, hwloc = %q", node, got, want)
				}
			}
			if len(hw.nodes) > 0 && len(topo.NodesWithCPUs()) != len(hw.nodes) {
				t.Errorf("numa nodes with cpus = %v, hwloc has %d", topo.NodesWithCPUs(), len(hw.nodes))
			}
			cores := groups(topo, func(c CPU) int { return int(c.Core) })
			if name != bulldozer {
				check("core", cores, setStrings(hw.cores))
				return
			}
			// Each kernel core is the union of two hwloc cores.
			hwCores := map[int]cpuset.CPUSet{}
			for _, c := range hw.cores {
				hwCores[c.Min()] = c
			}
			for i := range topo.NumCores() {
				set := topo.CoreCPUs(CoreID(i))
				n := 0
				for _, c := range hw.cores {
					if c.IsSubsetOf(set) {
						n++
					} else if c.Intersects(set) {
						t.Errorf("core %q cuts hwloc core %q", set, c)
					}
				}
				if n != 2 {
					t.Errorf("core %q holds %d hwloc cores, want the 2 of a compute unit", set, n)
				}
			}
		})
	}
}

func TestHwlocConsoleParser(t *testing.T) {
	dir := testutil.FixturesDir(t)
	hw := parseHwlocConsole(t, filepath.Join(dir, "16em64t-4s2c2t-offlines.console"))
	if got, want := hw.offline.String(), "2,5,13-14"; got != want {
		t.Errorf("offline = %q, want %q", got, want)
	}
	if got := fmt.Sprint(setStrings(hw.packages)); got != "[0,4,8,12 1,9 3,7,11,15 6,10]" {
		t.Errorf("packages = %s", got)
	}
	if got := hw.nodes[0].String(); got != hw.pus.String() {
		t.Errorf("node 0 = %q, want all PUs %q", got, hw.pus)
	}
}
