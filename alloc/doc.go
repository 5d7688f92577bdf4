// Package alloc decides which logical CPUs each workload gets. It is pure
// and deterministic: no I/O, no clocks, no global state, no dependence on
// map iteration order. The same State and Request always give the same
// Placement, and Release undoes an Allocate exactly.
//
// # Using it
//
// NewState takes a topology.Topology and NodeSettings (engine, kubelet option
// names, reserved CPUs). Assign records workloads already placed;
// Allocate places a Request and records it; Release frees it. Quality and
// Fragmentation measure a set of CPUs against the state; Pools returns the
// CPU set of each QoS class. A decision reuses buffers held in the State,
// so its cost and memory do not grow with the number of assignments (see
// bench_test.go); a simulator can churn one State, or Clone it per branch.
//
// A request the state cannot satisfy fails with a Rejection naming the
// constraint and what would satisfy it, for example
//
//	single-numa-node: 24 CPUs needed on one NUMA node; the most free on any node is 16 (node 1)
//
// A request or configuration that is wrong as written (an unknown policy
// name, options kubelet refuses together) fails with ErrInvalid.
//
// Resize changes an assignment's size in place: an exclusive set grows
// around the CPUs it holds (its cores' siblings, then whole cores of its
// L3 and NUMA node, other nodes only where its topology policy allows) and
// shrinks by giving back what it added last, never the CPUs it was placed
// on (Assignment.Promised); a shared request's quota changes. Both engines
// resize alike: the kubelet refuses to resize a static-policy pod.
//
// # QoS classes
//
// SYSTEM runs on the reserved CPUs. LSE gets an exclusive set shared with
// nobody. LSR gets an exclusive set that best-effort work may borrow while
// it is idle. LS shares the pool of every CPU not held by LSE or LSR (and
// not reserved, under strict-cpu-reservation); its requests may be
// fractional and are admitted while their quotas fit the pool. BE gets the
// LS pool plus the LSR CPUs; its size is the agent's business at run time.
//
// # Engines
//
// Policy "kubelet" reproduces the kubelet static CPU manager policy
// (Kubernetes v1.36, pkg/kubelet/cm/cpumanager, with the fix of PR #140498
// from v1.38: a socket or core is whole when all of its own CPUs are free,
// not when its free count equals the machine-wide average, which on hybrid
// P/E-core machines and machines with offline CPUs made a half-taken core
// look whole) choice for choice: whole NUMA nodes or sockets first
// (whichever is larger first), uncore caches with
// prefer-align-cpus-by-uncorecache, whole cores (skipped with
// distribute-cpus-across-cores), then single threads, always from the most
// allocated unit first and the lowest id on ties; distribute-cpus-across-numa
// with kubelet's balance score; full-pcpus-only with its SMT alignment
// errors; align-by-socket; strict-cpu-reservation; --reserved-cpus or a
// reserved count chosen the way kubelet chooses it; and the option pairs
// kubelet refuses. The topology policies give the NUMA hint kubelet's
// Topology Manager would merge from the CPU manager alone. The 96 cases of
// testdata/kubelet_cases.json are kubelet's own published expectations
// (cpu_assignment_test.go and policy_static_test.go tables, with their
// topologies; one from v1.38 for the fix); all pass. It departs from
// kubelet in three places:
//
//   - NUMA hints are computed directly, not by enumerating 2^n node masks:
//     the narrowest mask that holds the request, lowest mask on ties, found
//     node by node. The result is the same; the cost is O(n^2 log n), so
//     there is no 8-node limit. With align-by-socket, where no mask of the
//     fewest nodes holds the request, kubelet prefers every mask within the
//     fewest sockets and merges to the narrowest of them; corepin finds that
//     mask with a pruned search in the same order (bounded; on machines of
//     many nodes with adversarial free counts the bound can leave the hint
//     unpreferred where kubelet's enumeration would find one).
//   - kubelet v1.36.3 spins forever with full-pcpus-only plus
//     distribute-cpus-across-numa when the nodes it picked for the
//     remainder hold fewer free CPUs than a core; corepin does not score
//     such a split (there is no kubelet answer to reproduce) and every one
//     of its loops stops when it makes no progress (FuzzKubeletTerminates).
//   - distribute-cpus-across-numa keeps kubelet's subset search, which is
//     exponential in the number of NUMA nodes, as kubelet's is.
//
// Koordinator's bind, exclusive and NUMA strategies are not kubelet
// concepts: the kubelet engine refuses requests that set them.
//
// Policy "corepin" (the default) is corepin's own placement. For an
// exclusive request it looks for the smallest unit that holds it: one L3
// group, else one NUMA node (or socket, whichever nests inside the other),
// else the fewest NUMA nodes, closest by NUMA distance, fewest sockets, then
// the fullest. Within a unit it fills children largest first until the rest
// fits one child, gives the rest to the child that fits it most tightly
// (best fit, so whole free units stay whole), and takes CPUs of whole free
// cores before CPUs of cores another workload uses. It runs twice, once
// counting every free CPU and once counting only whole free cores, and keeps
// the better placement by (NUMA nodes, sockets, L3 groups, shared cores).
//
// It honours Koordinator's vocabulary: bind FullPCPUs (whole cores only;
// also what full-pcpus-only means here: under every topology policy the
// request is admitted only on whole free cores, so where kubelet admits a
// full-pcpus-only request by counting free CPUs and then fills it with
// threads of half-used cores, corepin refuses and says how many CPUs whole
// cores hold; TestKubeletRegressions) and SpreadByPCPUs (one thread per
// core first, over every node the set spans, before any core gives a
// second thread; also what distribute-cpus-across-cores means here); exclusive
// PCPULevel (avoid cores holding another PCPULevel workload) and
// NUMANodeLevel (avoid nodes holding another NUMANodeLevel workload); NUMA
// strategies MostAllocated (pack: among equal fits the fuller node, then
// the fuller socket), LeastAllocated (the emptiest node, then the one in
// the emptier socket) and
// DistributeEvenly (an even split over the fewest nodes that can take
// equal shares; also what distribute-cpus-across-numa means here). The
// topology policies restricted and single-numa-node refuse placements that
// span more nodes than the machine needs for the request, or more than one;
// with align-by-socket, restricted also admits what kubelet admits, the
// narrowest set of nodes within the fewest sockets, and places inside it.
//
// The 59 cases of testdata/koordinator_cases.json are Koordinator's
// published CPU-placement expectations (nodenumaresource
// cpu_accumulator_test.go and resource_manager_test.go, on its own CPU
// numbering), 83 runs with the FullPCPUs cases repeated under Default:
// 61 runs give Koordinator's set; 22 differ by design, each with its reason
// (fewer NUMA nodes; FullPCPUs strict where Koordinator falls back; no
// core shared with another workload where whole cores can take the
// request; no CPU shared by two pods; no preferred-CPU, amplification or
// required-bind input), and TestKoordinatorPublishedCases checks that
// each keeps its policies' promises and is aligned no worse than
// Koordinator's set.
//
// Where it departs from kubelet, and why:
//
//   - L3 first. kubelet looks at uncore caches only with an option and only
//     after whole nodes and sockets; corepin always looks for a single L3
//     group first, because a workload inside one last-level cache is the
//     best-placed case the field measured.
//   - Fit, not order. kubelet walks units from the most allocated and takes
//     what they have, so a request that fits one node can straddle two when
//     the fuller node is too small. corepin first finds the units that can
//     hold the whole request and picks the tightest of those.
//   - No shared cores when avoidable. kubelet finishes an odd request with a
//     thread of a half-used core; corepin prefers a thread of a whole free
//     core, so an exclusive set shares no physical core with another
//     workload unless the alternative spans more NUMA nodes, sockets or L3
//     groups. It ranks NUMA nodes over sockets over L3 groups over shared
//     cores.
//   - Never less aligned than kubelet on any single metric. Ranking alone
//     can buy a NUMA node or an L3 group with a shared core that kubelet
//     would not share. So where corepin's placement is not provably the
//     best possible (fewest nodes, L3 groups and sockets that could hold
//     the request, fewest shared cores), the placement kubelet would make
//     on the same state with the same options is computed too, and kept
//     when corepin's does not match or beat it on every one of NUMA nodes,
//     sockets, L3 groups and shared cores (kubeletGuard; requests with a
//     Koordinator bind, exclusive or NUMA strategy have no kubelet
//     equivalent and are not guarded). TestCorepinAlignedAtLeastAsWellAsKubelet
//     checks it on random states of every fixture and synthetic shape, and
//     counts where corepin is strictly better. The guard roughly doubles a
//     decision's median cost (still microseconds; the kubelet engine reuses
//     pooled buffers). Where the node counts show that corepin's placement
//     must share more cores than kubelet's does (on a busy node, most
//     requests larger than an L3 group's free whole cores), kubelet's is
//     made first and kept without making corepin's (kubeletFirst).
//   - Speed. Free counts per core, L3 group and node are kept as the state
//     changes, so a decision is a few passes over the cores, with no
//     per-decision maps: microseconds where kubelet takes milliseconds on a
//     256-CPU machine. BenchmarkDecisionSize measures decisions of 4, 16
//     and 64 CPUs, guard included, on 2 sockets x 64 cores x 2 threads (8
//     NUMA nodes, 16 L3 groups) at 50% random occupancy; the whole-cores
//     pass is skipped where it cannot span fewer nodes than the first, and
//     the kubelet engine sorts packed integer keys over precomputed unit
//     lists, so its cost stays a few passes over the cores.
package alloc
