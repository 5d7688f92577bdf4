package alloc

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/internal/testutil"
	"github.com/corepin/corepin/topology"
)

// FuzzKubeletTerminates places one request on a small random machine and
// state, with every option combination both engines accept, and fails if
// Allocate does not return within 5 s, panics, or returns a set that is
// not the request's size or not free. kubelet v1.36.3 itself never returns
// on some full-pcpus-only + distribute-cpus-across-numa states (issue 8 §2);
// corepin's loops each stop when they make no progress, and this fuzzer
// is what would catch one that does not.
func FuzzKubeletTerminates(f *testing.F) {
	// sockets, nodes per socket, L3 per node, cores per L3, threads per
	// core, option bits, topology policy, corepin engine, occupancy seed,
	// share of CPUs busy (percent), cpus.
	f.Add(uint8(2), uint8(2), uint8(1), uint8(3), uint8(2), uint8(0b000011), uint8(0), false, uint64(1), uint8(50), uint8(6))
	f.Add(uint8(1), uint8(4), uint8(1), uint8(3), uint8(2), uint8(0b000011), uint8(2), false, uint64(7), uint8(40), uint8(8))
	f.Add(uint8(2), uint8(4), uint8(2), uint8(2), uint8(2), uint8(0b000111), uint8(1), false, uint64(3), uint8(60), uint8(10))
	f.Add(uint8(2), uint8(2), uint8(1), uint8(8), uint8(1), uint8(0b010100), uint8(2), true, uint64(5), uint8(50), uint8(7))
	f.Add(uint8(4), uint8(1), uint8(1), uint8(4), uint8(4), uint8(0b101000), uint8(3), true, uint64(9), uint8(30), uint8(12))
	f.Fuzz(func(t *testing.T, sockets, nps, l3, cores, threads, optBits, tpIdx uint8, corepin bool, seed uint64, busyPct, cpus uint8) {
		shape := topology.Shape{Sockets: 1 + int(sockets%4), NodesPerSocket: 1 + int(nps%4), L3PerNode: 1 + int(l3%2),
			CoresPerL3: 1 + int(cores%6), ThreadsPerCore: 1 + int(threads%2)}
		topo, err := topology.Synthetic(shape)
		if err != nil {
			t.Skip(err)
		}
		var opts []string
		for i, name := range knownOptions {
			if optBits&(1<<i) != 0 {
				opts = append(opts, name)
			}
		}
		policy := PolicyKubelet
		if corepin {
			policy = PolicyCorepin
		}
		rng := rand.New(rand.NewPCG(seed, 1))
		var reserved cpuset.CPUSet
		if rng.IntN(2) == 0 {
			reserved = cpuset.New(0)
		}
		s, err := NewState(topo, NodeSettings{Policy: policy, Options: opts, Reserved: reserved})
		if errors.Is(err, ErrInvalid) {
			return // an option pair kubelet refuses
		}
		if err != nil {
			t.Fatal(err)
		}
		var busy cpuset.Builder
		for _, c := range topo.Online().Difference(reserved).List() {
			if rng.IntN(100) < int(busyPct%100) {
				busy.Add(c)
			}
		}
		if b := busy.Result(); !b.IsEmpty() {
			if err := s.Assign(Assignment{ID: "busy", CPUs: b}); err != nil {
				t.Fatal(err)
			}
		}
		free := s.freeBits().toSet()
		r := Request{ID: "req", CPUs: 1 + int(cpus)%topo.Online().Size(),
			TopologyPolicy: []TopologyPolicy{TopologyNone, TopologyBestEffort, TopologyRestricted, TopologySingleNUMANode}[tpIdx%4]}
		type outcome struct {
			p   Placement
			err error
		}
		done := make(chan outcome, 1)
		go func() {
			// Try answers as Admit on a copy, and leaves s alone.
			want, werr := s.Clone().Admit(r)
			if got, gerr := s.Try(r); fmt.Sprint(got, gerr) != fmt.Sprint(want, werr) {
				t.Errorf("Try = %v, %v; Admit on a clone %v, %v", got, gerr, want, werr)
			}
			p, err := s.Allocate(r)
			done <- outcome{p, err}
		}()
		var o outcome
		select {
		case o = <-done:
		case <-time.After(testutil.Patience):
			t.Fatalf("Allocate(%d cpus, %s, %v, %s) on %+v did not return in %v", r.CPUs, policy, opts, r.TopologyPolicy, shape, testutil.Patience)
		}
		if o.err != nil {
			if !errors.Is(o.err, ErrRejected) && !errors.Is(o.err, ErrInvalid) {
				t.Fatalf("Allocate error %v is neither a rejection nor invalid input", o.err)
			}
			return
		}
		if o.p.CPUs.Size() != r.CPUs || !o.p.CPUs.IsSubsetOf(free) {
			t.Fatalf("Allocate = %s (%d cpus), want %d of the free %s", o.p.CPUs, o.p.CPUs.Size(), r.CPUs, free)
		}
	})
}
