package topology

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/internal/quote"
)

// Paths inside the sysfs root, relative (fs.FS paths have no leading slash).
// The files are described in
// https://www.kernel.org/doc/html/latest/admin-guide/cputopology.html and
// https://www.kernel.org/doc/Documentation/ABI/stable/sysfs-devices-system-cpu.
const (
	cpuDir  = "sys/devices/system/cpu"
	nodeDir = "sys/devices/system/node"
)

// ErrBadSysfs is wrapped by errors about sysfs content that can't be read.
var ErrBadSysfs = errors.New("bad sysfs content")

// Option configures Discover.
type Option func(*discoverOptions)

type discoverOptions struct {
	skipAllowed bool
}

// WithoutCgroup makes every online CPU allowed instead of reading corepin's
// own cpuset cgroup; for callers that describe another machine.
func WithoutCgroup() Option { return func(o *discoverOptions) { o.skipAllowed = true } }

// Discover reads the CPU topology from fsys, a file system rooted where the
// machine's "/" is: sysfs is read under sys/devices/system and the process's
// cgroup under proc/self. To read a directory (this machine or a saved
// dump) use Open, which confines every read to the root and never blocks on
// a FIFO; pass Discover an fstest.MapFS in tests. Whatever fsys is, only
// regular files are read, each at most MaxFileSize bytes.
//
// It works with old kernels that expose only mask files (thread_siblings,
// core_siblings, shared_cpu_map, node cpumap), with offline CPUs (which have
// no topology directory), sparse NUMA node ids, machines without NUMA (every
// CPU in node 0) and without L3 (l3 = None). It reads the machines hwloc
// reads (issue 8): an empty online file counts as unknown; distance rows
// written per possible node id are read by id; an all-zero or stale cache
// map takes the core's CPUs; CPUs without package information form one
// package, so an unknown level never splits the levels below it. Each such
// guess is one entry of Topology.Warnings, naming all the CPUs it concerns.
// Files that old kernels lack are not errors; content that can't be parsed
// is, naming the file and quoting at most a short prefix of it.
func Discover(fsys fs.FS, opts ...Option) (*Topology, error) {
	var o discoverOptions
	for _, f := range opts {
		f(&o)
	}
	d := &discoverer{fsys: fsys}
	t, err := d.run(o)
	if err != nil {
		return nil, fmt.Errorf("discovering topology: %w", err)
	}
	return t, nil
}

type discoverer struct {
	fsys     fs.FS
	mu       sync.Mutex // guards warnings and guesses
	warnings []string
	guesses  map[string]*cpuset.Builder // what was guessed -> for which cpus
}

func (d *discoverer) warnf(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.warnings = append(d.warnings, fmt.Sprintf(format, args...))
}

// guess records that discovery had to guess for cpu. Each distinct guess
// (the predicate format and args make, e.g. "have an empty online file")
// becomes one warning naming all its CPUs ("cpus 1-3 have ..."), so a
// machine of 8192 CPUs warns once, not 8192 times.
func (d *discoverer) guess(cpu int, format string, args ...any) {
	what := fmt.Sprintf(format, args...)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.guesses == nil {
		d.guesses = map[string]*cpuset.Builder{}
	}
	if d.guesses[what] == nil {
		d.guesses[what] = &cpuset.Builder{}
	}
	d.guesses[what].Add(cpu)
}

// finishWarnings turns the guesses into warnings and sorts them all, so
// the result does not depend on the order CPUs were read in.
func (d *discoverer) finishWarnings() []string {
	for what, b := range d.guesses {
		d.warnings = append(d.warnings, "cpus "+b.Result().String()+" "+what)
	}
	slices.Sort(d.warnings)
	return d.warnings
}

// readCPUs reads every online CPU's files, several CPUs at a time: on large
// machines discovery is bound by file system calls, and the agent runs it at
// every start. (finishWarnings sorts the warnings this may record.)
func (d *discoverer) readCPUs(online cpuset.CPUSet) (map[int]*cpuInfo, error) {
	cpus := online.List()
	infos := make([]*cpuInfo, len(cpus))
	errs := make([]error, len(cpus))
	workers := min(runtime.GOMAXPROCS(0), 8, len(cpus))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(cpus) {
					return
				}
				infos[i], errs[i] = d.readCPU(cpus[i])
			}
		})
	}
	wg.Wait()
	out := make(map[int]*cpuInfo, len(cpus))
	for i, cpu := range cpus {
		if errs[i] != nil {
			return nil, errs[i] // the lowest CPU's error, deterministically
		}
		out[cpu] = infos[i]
	}
	return out, nil
}

// readOptional returns the trimmed content of name, ok=false when the file
// does not exist.
func (d *discoverer) readOptional(name string) (string, bool, error) {
	b, err := readFile(d.fsys, name)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err // a *fs.PathError, naming the file
	}
	return string(bytes.Trim(b, " \t\r\n\x00")), true, nil
}

func (d *discoverer) readSet(name string, mask bool) (cpuset.CPUSet, bool, error) {
	s, ok, err := d.readOptional(name)
	if err != nil || !ok {
		return cpuset.CPUSet{}, ok, err
	}
	var set cpuset.CPUSet
	if mask {
		set, err = cpuset.ParseMask(s)
	} else {
		set, err = cpuset.Parse(s)
	}
	if err != nil {
		return cpuset.CPUSet{}, true, fmt.Errorf("%w: parsing %s: %w", ErrBadSysfs, name, err)
	}
	return set, true, nil
}

func (d *discoverer) readInt(name string) (int, bool, error) {
	s, ok, err := d.readOptional(name)
	if err != nil || !ok {
		return 0, ok, err
	}
	v, err := parseInt(name, s)
	return v, true, err
}

// parseInt parses the trimmed content s of the file name as a decimal int.
func parseInt(name, s string) (int, error) {
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%w: parsing %s: %s is not an integer", ErrBadSysfs, name, quote.Short(s))
	}
	return v, nil
}

// siblings reads the first usable of the given files (lists before masks)
// for cpu. A file that exists but does not contain cpu itself is stale (real
// kernels have shipped stale *_list files beside a correct mask) or empty
// (old ia64 kernels write an all-zero shared_cpu_map) and is skipped with a
// warning. found=false when no file exists or none is usable.
func (d *discoverer) siblings(cpu int, dir string, names ...string) (cpuset.CPUSet, bool, error) {
	for _, n := range names {
		p := path.Join(dir, n)
		set, ok, err := d.readSet(p, !strings.HasSuffix(n, "_list"))
		if err != nil {
			return cpuset.CPUSet{}, false, err
		}
		if !ok {
			continue
		}
		if set.IsEmpty() {
			d.guess(cpu, "have an empty %s/%s; ignoring it", path.Base(dir), n)
			continue
		}
		if !set.Contains(cpu) {
			d.guess(cpu, "have a %s/%s that does not contain the cpu itself; ignoring it as stale", path.Base(dir), n)
			continue
		}
		return set, true, nil
	}
	return cpuset.CPUSet{}, false, nil
}

// cpuInfo is what discovery learns about one online CPU before indexing.
type cpuInfo struct {
	id                             int
	threads, pkg, die, cluster, l3 cpuset.CPUSet
	hasL3                          bool
	pkgID, dieID, coreID           int
	hasPkgID, hasDieID, hasCoreID  bool
	// whether threads and pkg came from a sibling file rather than a fallback
	threadsFound, pkgFound, dieFound bool
}

func (d *discoverer) run(o discoverOptions) (*Topology, error) {
	present, online, err := d.cpuSets()
	if err != nil {
		return nil, err
	}
	infos, err := d.readCPUs(online)
	if err != nil {
		return nil, err
	}
	cpuNode, distances, err := d.numa(present, online, infos)
	if err != nil {
		return nil, err
	}
	kinds, err := d.kinds(online)
	if err != nil {
		return nil, err
	}
	allowed := online
	if !o.skipAllowed {
		if a, ok := d.cgroupAllowed(); ok {
			allowed = a.Intersection(online)
		}
	}

	iso, err := d.isolation(present)
	if err != nil {
		return nil, err
	}

	cpus := d.index(present, online, infos, cpuNode)
	for i := range cpus {
		c := &cpus[i]
		c.Allowed = c.Online && allowed.Contains(c.ID)
		c.Kind = kinds[c.ID]
	}
	t, err := New(cpus, distances)
	if err != nil {
		return nil, err
	}
	t.isolation = iso
	t.Warnings = d.finishWarnings()
	return t, nil
}

// Files naming the CPUs the kernel keeps apart from general scheduling,
// each optional (missing means none):
//   - cpu/isolated: the isolcpus= boot parameter's CPUs
//     (https://www.kernel.org/doc/Documentation/ABI/testing/sysfs-devices-system-cpu);
//   - cpu/nohz_full: the nohz_full= CPUs, "(null)" on kernels built with
//     NO_HZ_FULL but booted without it
//     (https://www.kernel.org/doc/html/latest/timers/no_hz.html);
//   - cpuset.cpus.isolated of the cgroup v2 root: the CPUs of isolated
//     cpuset partitions, Linux 6.7 and later (6.12 lists the isolcpus=
//     CPUs there as well)
//     (https://docs.kernel.org/admin-guide/cgroup-v2.html#cpuset-interface-files).
const (
	isolatedFile   = cpuDir + "/isolated"
	nohzFullFile   = cpuDir + "/nohz_full"
	partitionsFile = "sys/fs/cgroup/cpuset.cpus.isolated"
)

// isolation reads the isolated CPUs, keeping those that are present.
func (d *discoverer) isolation(present cpuset.CPUSet) (Isolation, error) {
	var iso Isolation
	for _, f := range []struct {
		name string
		set  *cpuset.CPUSet
	}{{isolatedFile, &iso.Isolcpus}, {nohzFullFile, &iso.NohzFull}, {partitionsFile, &iso.Partitions}} {
		s, ok, err := d.readOptional(f.name)
		if err != nil {
			return iso, err
		}
		if !ok || s == "" || s == "(null)" {
			continue
		}
		set, err := cpuset.Parse(s)
		if err != nil {
			return iso, fmt.Errorf("%w: parsing %s: %w", ErrBadSysfs, f.name, err)
		}
		*f.set = set.Intersection(present)
	}
	// Linux 6.12 lists the isolcpus= CPUs in cpuset.cpus.isolated too,
	// with no partition made (seen in testdata/vm): a partition is what
	// the file holds beyond them.
	iso.Partitions = iso.Partitions.Difference(iso.Isolcpus)
	return iso, nil
}

// cpuSets returns the present CPUs (from "present", else the cpuN
// directories) and the online ones (from "online", else each CPU's own
// "online" file, else the presence of its topology directory).
func (d *discoverer) cpuSets() (present, online cpuset.CPUSet, err error) {
	entries, err := fs.ReadDir(d.fsys, cpuDir)
	if err != nil {
		return present, online, fmt.Errorf("listing cpus: %w", err)
	}
	var dirs cpuset.Builder
	for _, e := range entries {
		n, ok := strings.CutPrefix(e.Name(), "cpu")
		if !ok || n == "" || strings.TrimLeft(n, "0123456789") != "" {
			continue
		}
		id, err := strconv.Atoi(n)
		if err != nil || id > cpuset.MaxCPU {
			return present, online, fmt.Errorf("%w: cpu directory %s/%s has an id out of range", ErrBadSysfs, cpuDir, e.Name())
		}
		dirs.Add(id)
	}
	fromDirs := dirs.Result()
	p, hasPresent, err := d.readSet(cpuDir+"/present", false)
	if err != nil {
		return present, online, err
	}
	present = fromDirs.Union(p)
	on, hasOnline, err := d.readSet(cpuDir+"/online", false)
	if err != nil {
		return present, online, err
	}
	if hasOnline && on.IsEmpty() {
		// The CPU reading the file is online, so an empty list is a
		// broken file, not a machine without CPUs: ask each CPU instead.
		d.warnf("%s/online is empty; reading each cpu's own online file", cpuDir)
		hasOnline = false
	}
	if hasOnline {
		online = on.Intersection(present.Union(on))
		present = present.Union(on)
	} else {
		var b cpuset.Builder
		for cpu := range fromDirs.All() {
			dir := fmt.Sprintf("%s/cpu%d", cpuDir, cpu)
			s, ok, err := d.readOptional(dir + "/online")
			if err != nil {
				return present, online, err
			}
			if ok && s == "" {
				// hwloc counts such a CPU online when the kernel gives it
				// a topology directory; so does corepin.
				d.guess(cpu, "have an empty online file; counting each online where it has a topology directory")
				ok = false
			}
			if ok {
				v, err := parseInt(dir+"/online", s)
				if err != nil {
					return present, online, err
				}
				if v == 1 {
					b.Add(cpu)
				}
				continue
			}
			if _, err := fs.Stat(d.fsys, dir+"/topology"); err == nil {
				b.Add(cpu)
			}
		}
		online = b.Result()
	}
	if online.IsEmpty() {
		if !hasPresent && fromDirs.IsEmpty() {
			return present, online, fmt.Errorf("%w: no cpu found under %s", ErrBadSysfs, cpuDir)
		}
		return present, online, fmt.Errorf("%w: no online cpu under %s (present %q)", ErrBadSysfs, cpuDir, present.String())
	}
	return present, online, nil
}

func (d *discoverer) readCPU(cpu int) (*cpuInfo, error) {
	dir := fmt.Sprintf("%s/cpu%d/topology", cpuDir, cpu)
	ci := &cpuInfo{id: cpu}
	var err error
	var ok bool
	self := cpuset.New(cpu)
	if ci.threads, ci.threadsFound, err = d.siblings(cpu, dir, "core_cpus_list", "thread_siblings_list", "core_cpus", "thread_siblings"); err != nil {
		return nil, err
	} else if !ci.threadsFound {
		ci.threads = self
	}
	if ci.pkg, ci.pkgFound, err = d.siblings(cpu, dir, "package_cpus_list", "core_siblings_list", "package_cpus", "core_siblings"); err != nil {
		return nil, err
	} else if !ci.pkgFound {
		ci.pkg = self
	}
	if ci.die, ci.dieFound, err = d.siblings(cpu, dir, "die_cpus_list", "die_cpus"); err != nil {
		return nil, err
	}
	if ci.dieFound {
		// arm64 kernels report die_id -1 with die_cpus holding the CPU
		// alone: the die is unknown there, not one per CPU.
		if ci.dieID, ci.hasDieID, err = d.readInt(path.Join(dir, "die_id")); err != nil {
			return nil, err
		}
		ci.dieFound = !ci.hasDieID || ci.dieID >= 0
	}
	if ci.cluster, ok, err = d.siblings(cpu, dir, "cluster_cpus_list", "cluster_cpus"); err != nil {
		return nil, err
	} else if !ok {
		ci.cluster = ci.threads
	}
	// Raw ids matter only where the sibling files are missing.
	if !ci.pkgFound {
		if ci.pkgID, ci.hasPkgID, err = d.readInt(path.Join(dir, "physical_package_id")); err != nil {
			return nil, err
		}
		if !ci.pkgKnown() {
			// PS3, some POWER: threads but no package. An unknown level
			// must not split the ones below it: such CPUs form one package.
			d.guess(cpu, "have no package information (package_cpus, core_siblings, physical_package_id); taking them as one package")
		}
	}
	if !ci.threadsFound {
		if ci.coreID, ci.hasCoreID, err = d.readInt(path.Join(dir, "core_id")); err != nil {
			return nil, err
		}
		if !ci.hasCoreID {
			d.guess(cpu, "have no core information (core_cpus, thread_siblings, core_id); taking each as a core of its own")
		}
	}
	if ci.l3, ci.hasL3, err = d.lastLevelCache(cpu, ci.threads); err != nil {
		return nil, err
	}
	return ci, nil
}

// pkgKnown reports whether ci's package is known, from sibling files or a
// raw physical_package_id (-1 means unknown on s390 and POWER).
func (ci *cpuInfo) pkgKnown() bool { return ci.pkgFound || (ci.hasPkgID && ci.pkgID >= 0) }

// lastLevelCache returns the CPUs sharing cpu's level-3 cache, found by the
// "level" file of each cache/indexN (index numbers differ between machines).
// Where the cache's CPU files are missing, empty (old ia64 kernels) or
// stale, the cache is taken to be the core's, threads, as hwloc does.
func (d *discoverer) lastLevelCache(cpu int, threads cpuset.CPUSet) (cpuset.CPUSet, bool, error) {
	dir := fmt.Sprintf("%s/cpu%d/cache", cpuDir, cpu)
	entries, err := fs.ReadDir(d.fsys, dir)
	if errors.Is(err, fs.ErrNotExist) {
		return cpuset.CPUSet{}, false, nil
	}
	if err != nil {
		return cpuset.CPUSet{}, false, fmt.Errorf("listing caches: %w", err)
	}
	// The L3 is index3 on most machines: look there first.
	slices.SortStableFunc(entries, func(a, b fs.DirEntry) int {
		return cmp.Compare(boolInt(a.Name() != "index3"), boolInt(b.Name() != "index3"))
	})
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "index") {
			continue
		}
		idx := path.Join(dir, e.Name())
		level, ok, err := d.readInt(idx + "/level")
		if err != nil {
			return cpuset.CPUSet{}, false, err
		}
		if !ok || level != 3 {
			continue
		}
		if typ, _, err := d.readOptional(idx + "/type"); err != nil {
			return cpuset.CPUSet{}, false, err
		} else if typ == "Instruction" {
			continue
		}
		set, ok, err := d.siblings(cpu, idx, "shared_cpu_list", "shared_cpu_map")
		if err != nil {
			return cpuset.CPUSet{}, false, err
		}
		if !ok {
			set = threads
		}
		return set, true, nil
	}
	return cpuset.CPUSet{}, false, nil
}

// numa maps each present CPU to its NUMA node and reads the distance table.
// A kernel without NUMA support (no node directory) puts every CPU in node 0;
// with node directories, a CPU none of them holds is in node None (see the
// comment on orphans below).
func (d *discoverer) numa(present, online cpuset.CPUSet, infos map[int]*cpuInfo) (map[int]NodeID, map[NodeID][]int, error) {
	cpuNode := map[int]NodeID{}
	entries, err := fs.ReadDir(d.fsys, nodeDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("listing numa nodes: %w", err)
	}
	var nodes []NodeID
	for _, e := range entries {
		n, ok := strings.CutPrefix(e.Name(), "node")
		if !ok || n == "" || strings.TrimLeft(n, "0123456789") != "" {
			continue
		}
		id, err := strconv.Atoi(n)
		if err != nil || id > MaxNodeID {
			return nil, nil, fmt.Errorf("%w: numa node directory %s/%s has an id out of range", ErrBadSysfs, nodeDir, e.Name())
		}
		nodes = append(nodes, NodeID(id))
	}
	slices.Sort(nodes)
	if len(nodes) == 0 {
		for cpu := range present.All() {
			cpuNode[cpu] = 0
		}
		return cpuNode, nil, nil
	}
	distances := map[NodeID][]int{}
	for _, n := range nodes {
		dir := fmt.Sprintf("%s/node%d", nodeDir, n)
		set, ok, err := d.readSet(dir+"/cpulist", false)
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			if set, ok, err = d.readSet(dir+"/cpumap", true); err != nil {
				return nil, nil, err
			}
		}
		if !ok {
			// hwloc-era dumps and old kernels: cpuN links in the node directory.
			set, err = d.linkedCPUs(dir)
			if err != nil {
				return nil, nil, err
			}
		}
		for cpu := range set.All() {
			if prev, dup := cpuNode[cpu]; dup && prev != n {
				return nil, nil, fmt.Errorf("%w: cpu %d is listed in numa node %d and node %d", ErrBadSysfs, cpu, prev, n)
			}
			cpuNode[cpu] = n
		}
		row, ok, err := d.readOptional(dir + "/distance")
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			continue
		}
		fields := strings.Fields(row)
		if len(fields) > MaxNodeID+1 {
			// Bounds memory too: 1024 rows of a 1 MiB file each would be GBs.
			return nil, nil, fmt.Errorf("%w: %s/distance has %d entries, more than the %d numa nodes Linux can have", ErrBadSysfs, dir, len(fields), MaxNodeID+1)
		}
		dist := make([]int, 0, len(fields))
		for _, f := range fields {
			v, err := strconv.Atoi(f)
			if err != nil || v < 0 || v > MaxDistance {
				return nil, nil, fmt.Errorf("%w: parsing %s/distance: %s is not a distance", ErrBadSysfs, dir, quote.Short(row))
			}
			dist = append(dist, v)
		}
		distances[n] = dist
	}
	distances = d.matchDistances(nodes, distances)
	// Online CPUs no node directory lists: the nodeN link in the cpu
	// directory names their node where that node has a directory. Where it
	// names a node without one (a dual-socket Xeon whose node0 is possible
	// but not online, issue 17), or there is no link, the CPU is in no NUMA
	// node: hwloc takes NUMA nodes from the node directories' cpumaps only
	// and leaves such CPUs outside every node. So does corepin (NUMA None),
	// except that a CPU whose thread sibling is in a node joins it, so that
	// an unknown never splits a core.
	var orphans []int
	absent := map[NodeID]bool{}
	for cpu := range online.All() {
		if _, ok := cpuNode[cpu]; ok {
			continue
		}
		n, ok, err := d.cpuNodeLink(cpu)
		if err != nil {
			return nil, nil, err
		}
		if ok && slices.Contains(nodes, n) {
			cpuNode[cpu] = n
			continue
		}
		if ok {
			absent[n] = true
		}
		orphans = append(orphans, cpu)
	}
	for _, cpu := range orphans {
		n := NodeID(None)
		for s := range infos[cpu].threads.All() {
			if sn, ok := cpuNode[s]; ok && sn != None && online.Contains(s) {
				n = sn
				break
			}
		}
		switch {
		case n != None:
			d.guess(cpu, "belong to no numa node; placing each with its core's threads")
		case len(absent) > 0:
			d.guess(cpu, "belong to no numa node with a directory (they link to node %s); leaving them outside any numa node, as hwloc does", nodeList(absent))
		default:
			d.guess(cpu, "belong to no numa node; leaving them outside any numa node, as hwloc does")
		}
		cpuNode[cpu] = n
	}
	return cpuNode, distances, nil
}

// matchDistances orders each node's distance row by nodes (sorted). The
// kernel writes one column per online node, in id order; some machines
// write one per possible node id instead, so a machine whose node0 is
// absent has only node1 with "21 10". A row longer than the node count that
// covers every node id is therefore read by id (ignoring the columns of
// absent nodes), provided the node's distance to itself is the row's
// smallest. A row that fits neither is a warning and drops the whole table
// (Distance then falls back to 10 and 20): a wrong table is worse than none.
func (d *discoverer) matchDistances(nodes []NodeID, rows map[NodeID][]int) map[NodeID][]int {
	if len(rows) == 0 {
		return nil
	}
	if len(rows) != len(nodes) {
		d.warnf("only %d of %d numa nodes publish a distance row; ignoring the table", len(rows), len(nodes))
		return nil
	}
	out := make(map[NodeID][]int, len(rows))
	for _, n := range nodes {
		row := rows[n]
		if len(row) == len(nodes) {
			out[n] = row
			continue
		}
		if len(row) > int(nodes[len(nodes)-1]) {
			byID := make([]int, len(nodes))
			for j, m := range nodes {
				byID[j] = row[m]
			}
			if slices.Min(byID) == row[n] {
				out[n] = byID
				continue
			}
		}
		d.warnf("%s/node%d/distance has %d entries, matching neither the %d numa nodes nor their ids %v; ignoring the distance table", nodeDir, n, len(row), len(nodes), nodes)
		return nil
	}
	return out
}

// nodeList names a set of node ids in ascending order, e.g. "0,2".
func nodeList(set map[NodeID]bool) string {
	ids := slices.Sorted(maps.Keys(set))
	parts := make([]string, len(ids))
	for i, n := range ids {
		parts[i] = strconv.Itoa(int(n))
	}
	return strings.Join(parts, ",")
}

func (d *discoverer) linkedCPUs(dir string) (cpuset.CPUSet, error) {
	entries, err := fs.ReadDir(d.fsys, dir)
	if err != nil {
		return cpuset.CPUSet{}, fmt.Errorf("listing numa node cpus: %w", err)
	}
	var b cpuset.Builder
	for _, e := range entries {
		n, ok := strings.CutPrefix(e.Name(), "cpu")
		if !ok || n == "" || strings.TrimLeft(n, "0123456789") != "" {
			continue
		}
		if id, err := strconv.Atoi(n); err == nil && id <= cpuset.MaxCPU {
			b.Add(id)
		}
	}
	return b.Result(), nil
}

func (d *discoverer) cpuNodeLink(cpu int) (NodeID, bool, error) {
	entries, err := fs.ReadDir(d.fsys, fmt.Sprintf("%s/cpu%d", cpuDir, cpu))
	if err != nil {
		return 0, false, nil
	}
	for _, e := range entries {
		n, ok := strings.CutPrefix(e.Name(), "node")
		if !ok || n == "" || strings.TrimLeft(n, "0123456789") != "" {
			continue
		}
		if id, err := strconv.Atoi(n); err == nil {
			return NodeID(id), true, nil
		}
	}
	return 0, false, nil
}

// unionFind groups CPUs that any sibling set puts together: parent by CPU
// id (ids are at most cpuset.MaxCPU), a slice rather than a map because
// discovery of a large machine does a union per CPU of each group.
type unionFind []int32

func newUnionFind(maxCPU int) unionFind {
	u := make(unionFind, maxCPU+1)
	for i := range u {
		u[i] = int32(i)
	}
	return u
}

func (u unionFind) find(x int) int {
	for int(u[x]) != x {
		u[x] = u[u[x]] // path halving
		x = int(u[x])
	}
	return x
}

func (u unionFind) union(a, b int) {
	ra, rb := u.find(a), u.find(b)
	if ra == rb {
		return
	}
	if rb < ra {
		ra, rb = rb, ra
	}
	u[rb] = int32(ra) // the root is always the lowest cpu of the group
}

// partition groups online CPUs by the sets sel returns, then splits groups
// by parent (so a child unit never straddles two parents), and numbers the
// groups from 0 in order of their lowest CPU.
func partition(online cpuset.CPUSet, infos map[int]*cpuInfo, sel func(*cpuInfo) cpuset.CPUSet, parent func(cpu int) int) map[int]int {
	if online.IsEmpty() {
		return map[int]int{}
	}
	uf := newUnionFind(online.Max())
	// The CPUs of one group usually all name the same set: union a set's
	// members only when it differs from the last set seen with the same
	// lowest CPU, so a package of 4096 CPUs costs 4096 unions, not 4096
	// squared.
	last := map[int]cpuset.CPUSet{}
	for cpu := range online.All() {
		set := sel(infos[cpu]).Intersection(online)
		if set.IsEmpty() {
			continue
		}
		uf.union(cpu, set.Min())
		if prev, ok := last[set.Min()]; ok && prev.Equals(set) {
			continue
		}
		last[set.Min()] = set
		for s := range set.All() {
			uf.union(set.Min(), s)
		}
	}
	type key struct{ root, parent int }
	keyIndex := map[key]int{}
	out := map[int]int{}
	for cpu := range online.All() { // ascending, so indexes follow lowest cpus
		k := key{uf.find(cpu), parent(cpu)}
		idx, ok := keyIndex[k]
		if !ok {
			idx = len(keyIndex)
			keyIndex[k] = idx
		}
		out[cpu] = idx
	}
	return out
}

// index turns per-CPU sibling sets into the machine-wide indexes of the
// contract. Packages, dies, clusters and cores come from sibling masks (raw
// ids repeat across packages); when a machine has no mask files at all, the
// raw ids are used within their parent.
func (d *discoverer) index(present, online cpuset.CPUSet, infos map[int]*cpuInfo, cpuNode map[int]NodeID) []CPU {
	// CPUs whose sibling files are missing are grouped by their raw ids.
	pkgFallback := rawGroups(online, infos, func(ci *cpuInfo) (int, bool) { return ci.pkgID, !ci.pkgFound && ci.pkgKnown() })
	var unknown cpuset.Builder // CPUs without package information: one package
	for cpu := range online.All() {
		if !infos[cpu].pkgKnown() {
			unknown.Add(cpu)
		}
	}
	unknownPkg := unknown.Result()
	none := func(int) int { return 0 }
	socket := partition(online, infos, func(ci *cpuInfo) cpuset.CPUSet {
		switch {
		case ci.pkgFound:
			return ci.pkg
		case ci.pkgKnown():
			return pkgFallback[ci.pkgID]
		}
		return unknownPkg
	}, none)
	socketSets := groupSets(online, socket)
	die := partition(online, infos, func(ci *cpuInfo) cpuset.CPUSet {
		if !ci.dieFound {
			return socketSets[socket[ci.id]] // no die information: one die per package
		}
		return ci.die
	}, func(cpu int) int { return socket[cpu] })
	// A core never straddles a die or NUMA node. Without sibling files,
	// CPUs sharing a raw core_id within a die share a core.
	type coreParent struct{ die, node, rawCore int }
	parents := map[coreParent]int{}
	coreFallback := rawGroups(online, infos, func(ci *cpuInfo) (int, bool) { return ci.coreID, !ci.threadsFound && ci.hasCoreID })
	core := partition(online, infos, func(ci *cpuInfo) cpuset.CPUSet {
		if ci.threadsFound || !ci.hasCoreID {
			return ci.threads
		}
		return coreFallback[ci.coreID] // split below by parent
	}, func(cpu int) int {
		ci := infos[cpu]
		k := coreParent{die[cpu], int(cpuNode[cpu]), -1}
		if !ci.threadsFound && ci.hasCoreID {
			k.rawCore = ci.coreID
		}
		if _, ok := parents[k]; !ok {
			parents[k] = len(parents)
		}
		return parents[k]
	})
	coreSets := groupSets(online, core)
	// An L3 holds whole cores: a cache whose CPU list is missing, empty or
	// stale on one sibling must not split the core (hwloc takes the core's
	// CPUs there), and a core with an L3 on any CPU has it on all.
	var withL3 cpuset.Builder
	for cpu, ci := range infos {
		if ci.hasL3 {
			withL3.AddSet(coreSets[core[cpu]])
		}
	}
	l3 := partition(withL3.Result(), infos, func(ci *cpuInfo) cpuset.CPUSet {
		set := coreSets[core[ci.id]]
		if ci.hasL3 {
			set = set.Union(ci.l3)
		}
		return set
	}, none)
	// A cluster (CPUs sharing an L2 or module) holds whole cores.
	cluster := partition(online, infos, func(ci *cpuInfo) cpuset.CPUSet {
		return ci.cluster.Union(coreSets[core[ci.id]])
	}, func(cpu int) int { return socket[cpu] })
	cpus := make([]CPU, 0, present.Size())
	for id := range present.All() {
		c := CPU{ID: id, Socket: None, Die: None, Cluster: None, Core: None, L3: None, NUMA: None}
		if n, ok := cpuNode[id]; ok {
			c.NUMA = n
		}
		if online.Contains(id) {
			c.Online = true
			c.Socket = SocketID(socket[id])
			c.Die = DieID(die[id])
			c.Cluster = ClusterID(cluster[id])
			c.Core = CoreID(core[id])
			c.L3 = CacheID(l3IndexOr(l3, id))
		}
		cpus = append(cpus, c)
	}
	slices.SortFunc(cpus, func(a, b CPU) int { return cmp.Compare(a.ID, b.ID) })
	return cpus
}

func l3IndexOr(l3 map[int]int, cpu int) int {
	if i, ok := l3[cpu]; ok {
		return i
	}
	return None
}

// rawGroups groups the online CPUs for which key returns ok by the raw id it
// returns.
func rawGroups(online cpuset.CPUSet, infos map[int]*cpuInfo, key func(*cpuInfo) (int, bool)) map[int]cpuset.CPUSet {
	ids := map[int]int{}
	var keyed cpuset.Builder
	for cpu := range online.All() {
		if id, ok := key(infos[cpu]); ok {
			ids[cpu] = id
			keyed.Add(cpu)
		}
	}
	return groupSets(keyed.Result(), ids)
}

// groupSets inverts a cpu -> group index map into group -> CPUs.
func groupSets(online cpuset.CPUSet, group map[int]int) map[int]cpuset.CPUSet {
	bs := map[int]*cpuset.Builder{}
	for cpu := range online.All() {
		if bs[group[cpu]] == nil {
			bs[group[cpu]] = &cpuset.Builder{}
		}
		bs[group[cpu]].Add(cpu)
	}
	out := make(map[int]cpuset.CPUSet, len(bs))
	for g, b := range bs {
		out[g] = b.Result()
	}
	return out
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
