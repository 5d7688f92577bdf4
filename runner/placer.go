package runner

import (
	"fmt"
	"sync"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/topology"
)

// AllocPlacer gives pinned jobs CPUs from corepin's allocator: whole
// physical cores when K is a multiple of the SMT width, one NUMA node and
// one L3 where possible. alloc.State is a pure value; the mutex serialises
// the runner's goroutines.
type AllocPlacer struct {
	mu    sync.Mutex
	state *alloc.State
	tpc   int
}

var _ Placer = (*AllocPlacer)(nil)

// NewAllocPlacer returns a placer over t's CPUs that corepin's own cpuset
// cgroup allows; the others are not ours to hand out.
func NewAllocPlacer(t *topology.Topology) (*AllocPlacer, error) {
	st, err := alloc.NewState(t, alloc.NodeSettings{Reserved: t.Online().Difference(t.Allowed())})
	if err != nil {
		return nil, fmt.Errorf("starting the allocator: %w", err)
	}
	return &AllocPlacer{state: st, tpc: max(1, t.ThreadsPerCore())}, nil
}

// Place allocates n exclusive CPUs for job id.
func (p *AllocPlacer) Place(id string, n int) (Placement, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	bind := alloc.BindDefault
	if n%p.tpc == 0 {
		bind = alloc.BindFullPCPUs
	}
	pl, err := p.state.Allocate(alloc.Request{
		ID: id, CPUs: n, QoS: alloc.LSE, Bind: bind,
		TopologyPolicy: alloc.TopologyBestEffort,
	})
	if err != nil {
		return Placement{}, err
	}
	return Placement{CPUs: pl.CPUs, Mems: pl.NUMANodes}, nil
}

// Release gives job id's CPUs back.
func (p *AllocPlacer) Release(id string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state.Release(id)
}
