package topology

import "fmt"

// Shape describes a regular machine for tests, benchmarks and the simulator:
// Sockets x NodesPerSocket NUMA nodes, each with L3PerNode L3 groups of
// CoresPerL3 cores of ThreadsPerCore SMT threads.
type Shape struct {
	Sockets        int
	NodesPerSocket int
	L3PerNode      int
	CoresPerL3     int
	ThreadsPerCore int
	// SiblingsAdjacent numbers SMT siblings consecutively (0,1 on core 0), as
	// some ARM and POWER machines do. The default is the x86 Linux order, where
	// thread t of core c is CPU c + t*cores (siblings 0 and 64 on a 64-core
	// machine).
	SiblingsAdjacent bool
}

// String names the shape, e.g. "2s-4n-2l3-8c-2t".
func (s Shape) String() string {
	return fmt.Sprintf("%ds-%dn-%dl3-%dc-%dt", s.Sockets, s.NodesPerSocket, s.L3PerNode, s.CoresPerL3, s.ThreadsPerCore)
}

// Synthetic builds the topology of a regular machine. Every CPU is online
// and allowed; NUMA distances are 10 locally, 12 between nodes of one socket
// and 32 across sockets.
func Synthetic(s Shape) (*Topology, error) {
	if s.Sockets < 1 || s.NodesPerSocket < 1 || s.L3PerNode < 1 || s.CoresPerL3 < 1 || s.ThreadsPerCore < 1 {
		return nil, fmt.Errorf("%w: shape %v has a zero dimension", ErrInvalid, s)
	}
	cores := s.Sockets * s.NodesPerSocket * s.L3PerNode * s.CoresPerL3
	if cores*s.ThreadsPerCore > 1<<16 {
		return nil, fmt.Errorf("%w: shape %v has more than 65536 cpus", ErrInvalid, s)
	}
	var cpus []CPU
	for core := range cores {
		l3 := core / s.CoresPerL3
		node := l3 / s.L3PerNode
		socket := node / s.NodesPerSocket
		for th := range s.ThreadsPerCore {
			id := core + th*cores
			if s.SiblingsAdjacent {
				id = core*s.ThreadsPerCore + th
			}
			cpus = append(cpus, CPU{
				ID: id, Online: true, Allowed: true,
				Socket: SocketID(socket), Die: DieID(socket), Cluster: ClusterID(core),
				NUMA: NodeID(node), L3: CacheID(l3), Core: CoreID(core),
			})
		}
	}
	nodes := s.Sockets * s.NodesPerSocket
	dist := map[NodeID][]int{}
	for a := range nodes {
		row := make([]int, nodes)
		for b := range nodes {
			switch {
			case a == b:
				row[b] = 10
			case a/s.NodesPerSocket == b/s.NodesPerSocket:
				row[b] = 12
			default:
				row[b] = 32
			}
		}
		dist[NodeID(a)] = row
	}
	return New(cpus, dist)
}

// MustSynthetic is Synthetic for tests; it panics on error.
func MustSynthetic(s Shape) *Topology {
	t, err := Synthetic(s)
	if err != nil {
		panic(err)
	}
	return t
}
