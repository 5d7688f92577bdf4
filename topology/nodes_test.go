package topology

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/internal/testutil"
)

// Issue 17 §1: machines whose NUMA description is incomplete, derived from
// the real dumps. A variant edits a dump the way such machines differ from
// it: CPUs taken offline, node directories removed while CPUs still link to
// the node, memory-less and CPU-less nodes, node/online and node/possible
// masks that agree with the directories or not, and distance rows written
// per node directory or per possible node id. The expected reading is
// hwloc's: its .console view of the dump (packages, cores, L3 groups),
// restricted to the CPUs left online, and NUMA nodes taken from the node
// directories' CPU lists only (hwloc's look_sysfsnode reads nodeN/cpumap of
// the nodes it lists and never follows cpuN/nodeM links), so a CPU no node
// directory holds is in no NUMA node. With no node directory at all, hwloc
// and corepin put every CPU in one node 0.

// nodeVariant is one combination of the dimensions above.
type nodeVariant struct {
	offline    string // "", "two" (CPU 1 and the last CPU) or "node" (every CPU of the highest node)
	absent     string // "", "dir" (remove the lowest node's directory; its CPUs keep or gain cpuN/nodeM links)
	memless    bool   // the highest remaining node has no memory
	cpuless    bool   // one more node, without CPUs (CXL or HBM memory)
	masks      string // "" (no node/online, node/possible), "match" or "stale"
	byPossible bool   // distance rows carry one column per possible node id
}

func (v nodeVariant) String() string {
	return fmt.Sprintf("offline=%s,absent=%s,memless=%t,cpuless=%t,masks=%s,byPossible=%t",
		cmpOr(v.offline, "none"), cmpOr(v.absent, "none"), v.memless, v.cpuless, cmpOr(v.masks, "none"), v.byPossible)
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// allNodeVariants is every combination of the dimensions.
func allNodeVariants() []nodeVariant {
	var out []nodeVariant
	for _, off := range []string{"", "two", "node"} {
		for _, abs := range []string{"", "dir"} {
			for _, ml := range []bool{false, true} {
				for _, cl := range []bool{false, true} {
					for _, mk := range []string{"", "match", "stale"} {
						for _, bp := range []bool{false, true} {
							out = append(out, nodeVariant{off, abs, ml, cl, mk, bp})
						}
					}
				}
			}
		}
	}
	return out
}

// nodeBase is a real machine to derive variants from: its files, hwloc's
// reading of it and corepin's reading of the unmodified dump (for the NUMA
// distances, which the .console files do not carry).
type nodeBase struct {
	name        string
	files       fstest.MapFS
	hw          hwlocView
	orig        *Topology
	nodes       map[NodeID]cpuset.CPUSet // node directory -> its CPUs, as written
	possibleMax NodeID                   // the highest possible node id
}

const sysNode = "sys/devices/system/node"
const sysCPU = "sys/devices/system/cpu"

func loadNodeBase(t *testing.T, name string) nodeBase {
	t.Helper()
	files := testutil.SysfsFromTarBz2(t, name)
	orig, err := Discover(files)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	b := nodeBase{name: name, files: files, hw: parseHwlocConsole(t, filepath.Join(testutil.FixturesDir(t), name+".console")), orig: orig}
	b.nodes = map[NodeID]cpuset.CPUSet{}
	for _, n := range orig.Nodes() {
		b.nodes[n] = orig.NodeCPUs(n)
	}
	b.possibleMax = slices.Max(orig.Nodes())
	return b
}

// issueXeon is the machine of issue 17 §1, derived from the real
// dual-socket Xeon dump 8em64t-2s2ca2c (one node0 holding both packages):
// node0 (package 0) has no directory, node1 (package 1) has one whose
// distance row is "21 10" (by possible id), node/online is 1 and
// node/possible 0-1, and every CPU links to its node, node0 included.
func issueXeon(t *testing.T) nodeBase {
	t.Helper()
	b := loadNodeBase(t, "8em64t-2s2ca2c")
	f := cloneFS(b.files)
	pkg0, pkg1 := b.orig.SocketCPUs(0), b.orig.SocketCPUs(1)
	removeNodeDir(f, 0)
	writeNode(f, 1, pkg1, "21 10\n")
	f[sysNode+"/online"] = &fstest.MapFile{Data: []byte("1\n")}
	f[sysNode+"/possible"] = &fstest.MapFile{Data: []byte("0-1\n")}
	for cpu := range pkg0.All() {
		linkCPU(f, cpu, 0)
	}
	for cpu := range pkg1.All() {
		linkCPU(f, cpu, 1)
	}
	return nodeBase{name: "issue17-xeon-from-8em64t-2s2ca2c", files: f, hw: b.hw, orig: b.orig,
		nodes: map[NodeID]cpuset.CPUSet{1: pkg1}, possibleMax: 1}
}

func cloneFS(m fstest.MapFS) fstest.MapFS {
	out := make(fstest.MapFS, len(m))
	for k, v := range m {
		c := *v
		out[k] = &c
	}
	return out
}

func removeNodeDir(f fstest.MapFS, n NodeID) {
	dir := fmt.Sprintf("%s/node%d", sysNode, n)
	for k := range f {
		if k == dir || strings.HasPrefix(k, dir+"/") {
			delete(f, k)
		}
	}
}

// writeNode makes node n's directory list exactly cpus (cpulist, cpumap
// and the cpuN links old dumps carry) with the given distance row.
func writeNode(f fstest.MapFS, n NodeID, cpus cpuset.CPUSet, distance string) {
	dir := fmt.Sprintf("%s/node%d", sysNode, n)
	for k := range f {
		if strings.HasPrefix(k, dir+"/cpu") && strings.TrimLeft(strings.TrimPrefix(k, dir+"/cpu"), "0123456789") == "" {
			delete(f, k)
		}
	}
	f[dir] = &fstest.MapFile{Mode: fs.ModeDir | 0o755}
	f[dir+"/cpulist"] = &fstest.MapFile{Data: []byte(cpus.String() + "\n")}
	f[dir+"/cpumap"] = &fstest.MapFile{Data: []byte(mask(cpus) + "\n")}
	f[dir+"/distance"] = &fstest.MapFile{Data: []byte(distance)}
	for cpu := range cpus.All() {
		f[fmt.Sprintf("%s/cpu%d", dir, cpu)] = &fstest.MapFile{Mode: fs.ModeSymlink | 0o777, Data: fmt.Appendf(nil, "../../cpu/cpu%d", cpu)}
	}
}

func mask(s cpuset.CPUSet) string {
	if s.IsEmpty() {
		return "00000000"
	}
	return s.Mask()
}

// linkCPU gives cpu the sysfs link to node n (replacing any other).
func linkCPU(f fstest.MapFS, cpu int, n NodeID) {
	dir := fmt.Sprintf("%s/cpu%d", sysCPU, cpu)
	for k := range f {
		if rest, ok := strings.CutPrefix(k, dir+"/node"); ok && !strings.Contains(rest, "/") {
			delete(f, k)
		}
	}
	f[fmt.Sprintf("%s/node%d", dir, n)] = &fstest.MapFile{Mode: fs.ModeSymlink | 0o777, Data: fmt.Appendf(nil, "../../node/node%d", n)}
}

// nodeWant is the reading a variant must give.
type nodeWant struct {
	online   cpuset.CPUSet
	nodes    map[NodeID]cpuset.CPUSet // node -> online CPUs (only nodes with CPUs)
	noNode   cpuset.CPUSet
	allNodes []NodeID // every node of the table
	distance func(a, b NodeID) int
}

// apply edits a copy of b's files as v says and returns it with the
// expected reading.
func (b nodeBase) apply(v nodeVariant) (fstest.MapFS, nodeWant) {
	f := cloneFS(b.files)
	nodes := maps.Clone(b.nodes) // node dir -> CPUs it lists (online or not)
	ids := slices.Sorted(maps.Keys(nodes))
	online := b.orig.Online()
	// Distances between the dump's own nodes, as corepin read the dump;
	// 21 to a node that had no directory there (the issue machine's node0).
	dist := func(a, c NodeID) int {
		_, okA := b.nodes[a]
		_, okC := b.nodes[c]
		switch {
		case a == c:
			return 10
		case okA && okC:
			return b.orig.Distance(a, c)
		}
		return 21
	}
	possibleMax := b.possibleMax

	// CPUs offline.
	var off cpuset.CPUSet
	switch v.offline {
	case "two":
		off = cpuset.New(1, online.Max()).Intersection(online)
	case "node":
		if len(ids) > 1 {
			off = nodes[ids[len(ids)-1]].Intersection(online)
		}
	}
	if off.Equals(online) {
		off = cpuset.CPUSet{}
	}
	online = online.Difference(off)
	for cpu := range off.All() {
		dir := fmt.Sprintf("%s/cpu%d", sysCPU, cpu)
		for k := range f {
			if strings.HasPrefix(k, dir+"/topology") || strings.HasPrefix(k, dir+"/cache") {
				delete(f, k)
			}
		}
		f[dir+"/online"] = &fstest.MapFile{Data: []byte("0\n")}
	}
	if _, ok := f[sysCPU+"/online"]; ok || !off.IsEmpty() {
		f[sysCPU+"/online"] = &fstest.MapFile{Data: []byte(online.String() + "\n")}
	}
	for n, cpus := range nodes {
		nodes[n] = cpus.Difference(off) // the kernel drops offline CPUs from node masks
	}

	// A node directory removed; its CPUs link to the absent node.
	removed := NodeID(None)
	if v.absent == "dir" && len(ids) > 0 {
		removed = ids[0]
		for cpu := range b.nodes[removed].All() {
			linkCPU(f, cpu, removed)
		}
		delete(nodes, removed)
		removeNodeDir(f, removed)
	}
	// A CPU-less node beyond the possible ones.
	if v.cpuless {
		c := possibleMax + 1
		possibleMax = c
		nodes[c] = cpuset.CPUSet{}
		base := dist
		dist = func(a, x NodeID) int {
			switch {
			case a == x:
				return 10
			case a == c || x == c:
				return 30
			}
			return base(a, x)
		}
	}
	kept := slices.Sorted(maps.Keys(nodes))
	// Rewrite every kept node's directory: its CPUs and its distance row.
	for _, n := range kept {
		cols := kept
		if v.byPossible {
			cols = nil
			for i := range possibleMax + 1 {
				cols = append(cols, NodeID(i))
			}
		}
		var row []string
		for _, m := range cols {
			row = append(row, strconv.Itoa(dist(n, m)))
		}
		writeNode(f, n, nodes[n], strings.Join(row, " ")+"\n")
	}
	if v.memless && len(kept) > 0 {
		n := kept[len(kept)-1]
		f[fmt.Sprintf("%s/node%d/meminfo", sysNode, n)] = &fstest.MapFile{Data: fmt.Appendf(nil, "Node %d MemTotal:       0 kB\nNode %d MemFree:        0 kB\n", n, n)}
		delete(f, fmt.Sprintf("%s/node%d/hugepages", sysNode, n))
	}
	switch v.masks {
	case "":
		delete(f, sysNode+"/online")
		delete(f, sysNode+"/possible")
	case "match":
		f[sysNode+"/online"] = &fstest.MapFile{Data: []byte(nodeSet(kept) + "\n")}
		f[sysNode+"/possible"] = &fstest.MapFile{Data: fmt.Appendf(nil, "0-%d\n", possibleMax)}
	case "stale":
		// Masks that disagree with the directories: corepin lists nodes by
		// their directories, so they change nothing.
		f[sysNode+"/online"] = &fstest.MapFile{Data: []byte("0\n")}
		f[sysNode+"/possible"] = &fstest.MapFile{Data: fmt.Appendf(nil, "0-%d\n", possibleMax+2)}
	}

	want := nodeWant{online: online, nodes: map[NodeID]cpuset.CPUSet{}, distance: dist}
	if len(kept) == 0 {
		// No node directory left: a kernel without NUMA, every CPU in node 0.
		want.nodes[0] = online
		want.allNodes = []NodeID{0}
		want.distance = func(a, c NodeID) int { return 10 }
		return f, want
	}
	var in cpuset.Builder
	for _, n := range kept {
		if s := nodes[n].Intersection(online); !s.IsEmpty() {
			want.nodes[n] = s
			in.AddSet(s)
		}
	}
	want.noNode = online.Difference(in.Result())
	want.allNodes = kept
	return f, want
}

func nodeSet(ids []NodeID) string {
	var b cpuset.Builder
	for _, n := range ids {
		b.Add(int(n))
	}
	return b.Result().String()
}

// checkNodeVariant discovers f and checks it against want and hwloc's
// grouping of the CPUs left online; the document round-trips.
func checkNodeVariant(t *testing.T, b nodeBase, f fstest.MapFS, want nodeWant) *Topology {
	t.Helper()
	topo, err := Discover(f)
	if err != nil {
		t.Fatalf("Discover refused the machine: %v", err)
	}
	if !topo.Online().Equals(want.online) {
		t.Errorf("online = %s, want %s", topo.Online(), want.online)
	}
	got := map[NodeID]cpuset.CPUSet{}
	for _, n := range topo.NodesWithCPUs() {
		got[n] = topo.NodeCPUs(n)
	}
	if !maps.EqualFunc(got, want.nodes, cpuset.CPUSet.Equals) {
		t.Errorf("numa nodes = %v, want %v", got, want.nodes)
	}
	if !topo.NoNodeCPUs().Equals(want.noNode) {
		t.Errorf("cpus in no numa node = %s, want %s", topo.NoNodeCPUs(), want.noNode)
	}
	for cpu := range want.noNode.All() {
		if c := cpuField(t, topo, cpu); c.NUMA != None {
			t.Errorf("cpu %d numa = %d, want %d (none)", cpu, c.NUMA, None)
		}
	}
	if got := topo.Nodes(); !slices.Equal(got, want.allNodes) {
		t.Errorf("Nodes() = %v, want %v", got, want.allNodes)
	}
	for _, a := range want.allNodes {
		for _, c := range want.allNodes {
			if g, w := topo.Distance(a, c), want.distance(a, c); g != w {
				t.Errorf("Distance(%d, %d) = %d, want %d", a, c, g, w)
			}
		}
	}
	// hwloc's packages, L3 groups and cores of the CPUs left online.
	restrict := func(sets []cpuset.CPUSet) []string {
		var out []cpuset.CPUSet
		for _, s := range sets {
			if s = s.Intersection(want.online); !s.IsEmpty() {
				out = append(out, s)
			}
		}
		return setStrings(out)
	}
	check := func(what string, got, want []string) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Errorf("%s groups:\n got %q\nwant %q (hwloc)", what, got, want)
		}
	}
	check("package", groups(topo, func(c CPU) int { return int(c.Socket) }), restrict(b.hw.packages))
	check("l3", groups(topo, func(c CPU) int { return int(c.L3) }), restrict(b.hw.l3s))
	if b.orig.NumCores() == len(b.hw.cores) { // all but Bulldozer (see bulldozer)
		check("core", groups(topo, func(c CPU) int { return int(c.Core) }), restrict(b.hw.cores))
	}
	// The JSON document and the text view carry every online CPU.
	var doc bytes.Buffer
	if err := json.NewEncoder(&doc).Encode(topo.Doc()); err != nil {
		t.Fatal(err)
	}
	back, err := ReadDoc(&doc)
	if err != nil {
		t.Fatalf("ReadDoc of its own document: %v", err)
	}
	if !back.NoNodeCPUs().Equals(topo.NoNodeCPUs()) || back.Summary() != topo.Summary() {
		t.Errorf("document round trip: no-node %s summary %q, want %s %q", back.NoNodeCPUs(), back.Summary(), topo.NoNodeCPUs(), topo.Summary())
	}
	var text strings.Builder
	if err := topo.Render(&text, RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	var shown cpuset.Builder
	for _, m := range nodeGroupLine.FindAllStringSubmatch(text.String(), -1) {
		set, err := cpuset.Parse(m[2])
		if err != nil {
			t.Fatalf("text view line %q: %v", m[0], err)
		}
		shown.AddSet(set)
		if m[1] == "(no NUMA node)" && !set.IsSubsetOf(want.noNode) {
			t.Errorf("text view shows %s in no NUMA node, want only %s", set, want.noNode)
		}
	}
	if got := shown.Result(); !got.Equals(want.online) {
		t.Errorf("text view shows cpus %s in its NUMA groups, want every online cpu %s:\n%s", got, want.online, text.String())
	}
	return topo
}

var nodeGroupLine = regexp.MustCompile(`(?m)^  (NUMA node \d+|\(no NUMA node\))  cpus (\S+)$`)

// TestDiscoverIssue17Xeon is the machine of the field report, derived from
// a real dual-socket Xeon dump: two packages, one NUMA node (1) holding
// package 1, package 0's CPUs in no node, CPUs 0-3 and the last offline as
// reported (the dump has 8 CPUs, not 24). It was refused with "node 1 has 1
// distances for 2 nodes".
func TestDiscoverIssue17Xeon(t *testing.T) {
	b := issueXeon(t)
	f, want := b.apply(nodeVariant{masks: "match", byPossible: true})
	for file, content := range map[string]string{"online": "1\n", "possible": "0-1\n", "node1/distance": "21 10\n"} {
		if got := string(f[sysNode+"/"+file].Data); got != content {
			t.Fatalf("derived machine: node/%s = %q, want %q as reported", file, got, content)
		}
	}
	if _, ok := f[sysNode+"/node0"]; ok {
		t.Fatal("derived machine has a node0 directory")
	}
	// The report's offline CPUs, scaled: 0-1 of package 0 and the last.
	pkg0 := b.orig.SocketCPUs(0)
	off := cpuset.New(pkg0.List()[0], pkg0.List()[1], b.orig.Online().Max())
	on := b.orig.Online().Difference(off)
	f[sysCPU+"/online"] = &fstest.MapFile{Data: []byte(on.String() + "\n")}
	for cpu := range off.All() {
		for k := range f {
			if strings.HasPrefix(k, fmt.Sprintf("%s/cpu%d/topology", sysCPU, cpu)) {
				delete(f, k)
			}
		}
	}
	for cpu := range pkg0.Intersection(on).All() {
		if _, ok := f[fmt.Sprintf("%s/cpu%d/node0", sysCPU, cpu)]; !ok {
			t.Fatalf("derived machine: cpu %d does not link to node0", cpu)
		}
	}
	want.online = on
	want.nodes = map[NodeID]cpuset.CPUSet{1: b.orig.SocketCPUs(1).Intersection(on)}
	want.noNode = pkg0.Intersection(on)
	want.allNodes = []NodeID{1}
	topo := checkNodeVariant(t, b, f, want)
	if n := topo.NumSockets(); n != 2 {
		t.Errorf("packages = %d, want 2 (hwloc)", n)
	}
	if len(topo.Warnings) != 1 || !strings.Contains(topo.Warnings[0], "link to node 0") {
		t.Errorf("warnings = %q, want one saying the cpus link to node 0", topo.Warnings)
	}
	if s := topo.Summary(); !strings.Contains(s, "1 NUMA node (") || !strings.Contains(s, "in none)") {
		t.Errorf("Summary() = %q, want one node and the CPUs in none", s)
	}
}

// TestDiscoverNodeVariants reads every combination of the issue 17
// dimensions on every real dump and on the issue's own machine, each as
// hwloc reads it; never a refusal.
func TestDiscoverNodeVariants(t *testing.T) {
	bases := []nodeBase{issueXeon(t)}
	for _, name := range testutil.Fixtures(t) {
		bases = append(bases, loadNodeBase(t, name))
	}
	variants := allNodeVariants()
	for _, b := range bases {
		vs := variants
		if testing.Short() || b.orig.Online().Size() > 16 {
			// The large dumps take a deterministic sample of the
			// combinations (the fuzzer covers the rest).
			r := rand.New(rand.NewPCG(uint64(len(b.name)), 17))
			vs = nil
			for _, v := range variants {
				if r.IntN(6) == 0 || (v.absent == "dir" && v.byPossible && v.offline == "two") {
					vs = append(vs, v)
				}
			}
		}
		t.Run(b.name, func(t *testing.T) {
			for _, v := range vs {
				t.Run(v.String(), func(t *testing.T) {
					f, want := b.apply(v)
					checkNodeVariant(t, b, f, want)
				})
			}
		})
	}
}

// FuzzDiscoverNodeVariants draws a dump, a combination and a random set of
// CPUs to take offline: discovery never refuses the machine and reads it
// as hwloc does.
func FuzzDiscoverNodeVariants(f *testing.F) {
	f.Add(uint8(0), uint8(0), uint64(0))
	f.Add(uint8(0), uint8(11), uint64(6))
	f.Add(uint8(3), uint8(200), uint64(1<<40|77))
	f.Add(uint8(5), uint8(143), uint64(0xdeadbeef))
	names := testutil.Fixtures(f)
	bases := map[int]nodeBase{}
	variants := allNodeVariants()
	f.Fuzz(func(t *testing.T, base, variant uint8, offline uint64) {
		i := int(base) % (len(names) + 1)
		b, ok := bases[i]
		if !ok {
			if i == 0 {
				b = issueXeon(t)
			} else {
				b = loadNodeBase(t, names[i-1])
			}
			bases[i] = b
		}
		v := variants[int(variant)%len(variants)]
		fsys, want := b.apply(v)
		// Random offline CPUs on top (never all of them).
		var off cpuset.Builder
		for j, cpu := range want.online.List() {
			if j < 64 && offline&(1<<j) != 0 {
				off.Add(cpu)
			}
		}
		if o := off.Result(); !o.IsEmpty() && !o.Equals(want.online) {
			want.online = want.online.Difference(o)
			fsys[sysCPU+"/online"] = &fstest.MapFile{Data: []byte(want.online.String() + "\n")}
			for cpu := range o.All() {
				for k := range fsys {
					if strings.HasPrefix(k, fmt.Sprintf("%s/cpu%d/", sysCPU, cpu)) && (strings.Contains(k, "/topology") || strings.Contains(k, "/cache")) {
						delete(fsys, k)
					}
				}
			}
			for n, s := range want.nodes {
				if s = s.Intersection(want.online); s.IsEmpty() {
					delete(want.nodes, n)
				} else {
					want.nodes[n] = s
				}
			}
			want.noNode = want.noNode.Intersection(want.online)
		}
		checkNodeVariant(t, b, fsys, want)
	})
}
