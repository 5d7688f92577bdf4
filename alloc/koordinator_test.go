package alloc

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/topology"
)

// koordCase is one CPU-placement case published in Koordinator's scheduler
// tests (testdata/koordinator_cases.json names the files and commits; each
// case names its test function and case name). The fields are facts of the
// case: the machine, the CPUs already held and with which exclusive
// policy, the request and Koordinator's expected set. Corepin's own answer
// is recorded only where it differs, with the reason.
type koordCase struct {
	From    string `json:"from"`
	Name    string `json:"name"`
	Machine [4]int `json:"machine"` // sockets, nodes per socket, cores per node, threads per core
	Held    []struct {
		CPUs      string    `json:"cpus"`
		Exclusive Exclusive `json:"exclusive"`
	} `json:"held"`
	Hint        string       `json:"hint"`          // NUMA nodes of the topology hint
	Preferred   string       `json:"preferred"`     // Koordinator's preferred CPUs; corepin has no such input
	MaxRefCount int          `json:"max_ref_count"` // above 1, Koordinator lets pods share a CPU
	Required    bool         `json:"required_bind"`
	Amplified   bool         `json:"amplified"`
	CPUs        int          `json:"cpus"`
	QoS         QoS          `json:"qos"`
	Bind        Bind         `json:"bind"`
	Exclusive   Exclusive    `json:"exclusive"`
	NUMA        NUMAStrategy `json:"numa"`
	Want        string       `json:"want"`
	WantError   bool         `json:"want_error"`
	Note        string       `json:"note"`

	// Corepin is corepin's answer where it differs from Koordinator's: a
	// CPU set, or "error: " and the start of its rejection; Why says why
	// the difference is by design.
	Corepin string `json:"corepin"`
	Why     string `json:"why"`
	// AlsoDefault runs the case again with bind Default: Koordinator's
	// scheduler resolves Default to its DefaultCPUBindPolicy argument,
	// FullPCPUs as preferred unless configured, so Koordinator's answer
	// is the same. DefaultCorepin and DefaultWhy are corepin's answer and
	// the reason where that run differs.
	AlsoDefault    bool   `json:"also_default"`
	DefaultCorepin string `json:"default_corepin"`
	DefaultWhy     string `json:"default_why"`
}

func loadKoordCases(t *testing.T) []koordCase {
	t.Helper()
	data, err := os.ReadFile("testdata/koordinator_cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Cases []koordCase `json:"cases"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	return f.Cases
}

// koordMachine builds the machine Koordinator's buildCPUTopologyForTest
// builds, with its CPU ids: cores numbered socket by socket, node by node,
// and SMT siblings adjacent (core c holds CPUs c*t .. c*t+t-1). It checks
// the ids, since every expected set depends on them. Koordinator's test
// machines have no L3 information; here each NUMA node is one L3 group.
func koordMachine(t *testing.T, m [4]int) *topology.Topology {
	t.Helper()
	topo := topology.MustSynthetic(topology.Shape{Sockets: m[0], NodesPerSocket: m[1], L3PerNode: 1, CoresPerL3: m[2], ThreadsPerCore: m[3], SiblingsAdjacent: true})
	if n := topo.Online().Size(); n != m[0]*m[1]*m[2]*m[3] {
		t.Fatalf("machine %v has %d CPUs", m, n)
	}
	for _, c := range topo.CPUs() {
		core := c.ID / m[3]
		node := core / m[2]
		if int(c.Core) != core || int(c.NUMA) != node || int(c.Socket) != node/m[1] {
			t.Fatalf("machine %v: cpu %d is core %d node %d socket %d, Koordinator numbers it core %d node %d socket %d",
				m, c.ID, c.Core, c.NUMA, c.Socket, core, node, node/m[1])
		}
	}
	return topo
}

// koordState holds the case's CPUs. Koordinator may hold a CPU twice
// (max_ref_count 2); corepin's exclusive sets never overlap, so a CPU held
// again is left with its first holder.
func koordState(t *testing.T, topo *topology.Topology, c koordCase) *State {
	t.Helper()
	s, err := NewState(topo, NodeSettings{Policy: PolicyCorepin})
	if err != nil {
		t.Fatal(err)
	}
	held := cpuset.New()
	for i, h := range c.Held {
		set := cpuset.MustParse(h.CPUs).Difference(held)
		held = held.Union(set)
		if set.IsEmpty() {
			continue
		}
		if err := s.Assign(Assignment{ID: fmt.Sprintf("held-%d", i), CPUs: set, Exclusive: h.Exclusive}); err != nil {
			t.Fatalf("Assign %s: %v", set, err)
		}
	}
	return s
}

// TestKoordinatorPublishedCases replays Koordinator's published CPU
// placement cases under policy corepin. Where corepin gives Koordinator's
// set the case must stay identical; where it differs by design the case
// records corepin's set and the reason, and corepin's set must keep the
// promises of the policies it was asked for and be aligned no worse than
// Koordinator's. A recorded difference that stops differing fails too, so
// the table cannot go stale.
func TestKoordinatorPublishedCases(t *testing.T) {
	cases := loadKoordCases(t)
	if len(cases) < 30 {
		t.Fatalf("only %d Koordinator cases loaded", len(cases))
	}
	var runs, same, differ int
	covered := map[string]bool{}
	for _, c := range cases {
		binds := []Bind{c.Bind}
		if c.AlsoDefault {
			binds = append(binds, BindDefault)
		}
		for _, bind := range binds {
			corepin, why := c.Corepin, c.Why
			if bind == BindDefault && c.Bind != BindDefault {
				corepin, why = c.DefaultCorepin, c.DefaultWhy
			}
			runs++
			if corepin == "" {
				same++
			} else {
				differ++
			}
			covered[string(bind)], covered[string(c.Exclusive)], covered[string(c.NUMA)] = true, true, true
			t.Run(fmt.Sprintf("%s/%s/%s", c.From, c.Name, bind), func(t *testing.T) {
				if (corepin == "") != (why == "") {
					t.Fatalf("case records corepin %q with reason %q: a difference needs both", corepin, why)
				}
				topo := koordMachine(t, c.Machine)
				s := koordState(t, topo, c)
				r := Request{ID: "pod", CPUs: c.CPUs, QoS: c.QoS, Bind: bind, Exclusive: c.Exclusive, NUMA: c.NUMA}
				for n := range cpuset.MustParse(c.Hint).All() {
					r.Hint = append(r.Hint, topology.NodeID(n))
				}
				before := s.Clone()
				p, err := s.Allocate(r)
				got := p.CPUs.String()
				if err != nil {
					got = "error: " + err.Error()
				}
				koord := c.Want
				if c.WantError {
					koord = "error"
				}
				if corepin == "" {
					// Identical: Koordinator's set, or a refusal where it refuses.
					if c.WantError {
						if !errors.Is(err, ErrRejected) {
							t.Fatalf("Allocate = %s, want a rejection (Koordinator refuses)", got)
						}
						return
					}
					if err != nil || !p.CPUs.Equals(cpuset.MustParse(c.Want)) {
						t.Fatalf("Allocate = %s, want %s (Koordinator)", got, c.Want)
					}
					return
				}
				// Differs by design: corepin's recorded answer, and never
				// Koordinator's (else the record is stale).
				if wantErr, ok := strings.CutPrefix(corepin, "error: "); ok {
					if !errors.Is(err, ErrRejected) || !strings.HasPrefix(err.Error(), wantErr) {
						t.Fatalf("Allocate = %s, want a rejection starting %q (differs from Koordinator's %s by design: %s)", got, wantErr, koord, why)
					}
					if c.WantError {
						t.Fatalf("recorded as a difference, but corepin refuses as Koordinator does")
					}
					return
				}
				if err != nil || !p.CPUs.Equals(cpuset.MustParse(corepin)) {
					t.Fatalf("Allocate = %s, want %s (differs from Koordinator's %s by design: %s)", got, corepin, koord, why)
				}
				if !c.WantError && p.CPUs.Equals(cpuset.MustParse(c.Want)) {
					t.Fatalf("recorded as a difference, but corepin gives Koordinator's %s", c.Want)
				}
				checkKoordPromises(t, before, r, p, c)
			})
		}
	}
	for _, v := range []string{string(BindFullPCPUs), string(BindSpreadByPCPUs), string(BindDefault),
		string(ExclusiveNone), string(ExclusivePCPULevel), string(ExclusiveNUMANodeLevel), string(MostAllocated), string(LeastAllocated)} {
		if !covered[v] {
			t.Errorf("no Koordinator case covers %s", v)
		}
	}
	t.Logf("%d Koordinator cases, %d runs: %d identical, %d differ by design", len(cases), runs, same, differ)
}

// checkKoordPromises checks what a placement that differs from
// Koordinator's must still be: the size asked for; whole cores under
// FullPCPUs; no core of another PCPULevel workload under PCPULevel and no
// node of another NUMANodeLevel workload under NUMANodeLevel; inside the
// hinted nodes; and, where Koordinator places too, no more NUMA nodes,
// sockets or shared cores than Koordinator's set on the same state.
func checkKoordPromises(t *testing.T, before *State, r Request, p Placement, c koordCase) {
	t.Helper()
	topo := before.Topology()
	if r.QoS == LS || r.QoS == BE {
		if want := before.Pools().LS; r.QoS == LS && !p.CPUs.Equals(want) {
			t.Errorf("LS placement %s, want the shared pool %s", p.CPUs, want)
		}
		return
	}
	if p.CPUs.Size() != r.CPUs {
		t.Errorf("placement %s has %d CPUs, want %d", p.CPUs, p.CPUs.Size(), r.CPUs)
	}
	pcpuHeld, numaHeld := cpuset.New(), cpuset.New()
	for _, h := range c.Held {
		switch h.Exclusive {
		case ExclusivePCPULevel:
			pcpuHeld = pcpuHeld.Union(cpuset.MustParse(h.CPUs))
		case ExclusiveNUMANodeLevel:
			numaHeld = numaHeld.Union(cpuset.MustParse(h.CPUs))
		}
	}
	for cpu := range p.CPUs.All() {
		info, _ := topo.CPU(cpu)
		core := topo.CoreCPUs(info.Core)
		if r.Bind == BindFullPCPUs && !core.IsSubsetOf(p.CPUs) {
			t.Errorf("FullPCPUs placement %s takes part of core %s", p.CPUs, core)
		}
		if r.Exclusive == ExclusivePCPULevel && !core.Intersection(pcpuHeld).IsEmpty() {
			t.Errorf("PCPULevel placement %s shares core %s with a PCPULevel workload", p.CPUs, core)
		}
		if r.Exclusive == ExclusiveNUMANodeLevel && !topo.NodeCPUs(info.NUMA).Intersection(numaHeld).IsEmpty() {
			t.Errorf("NUMANodeLevel placement %s shares node %d with a NUMANodeLevel workload", p.CPUs, info.NUMA)
		}
		if c.Hint != "" && !cpuset.MustParse(c.Hint).Contains(int(info.NUMA)) {
			t.Errorf("placement %s leaves the hinted nodes %s", p.CPUs, c.Hint)
		}
	}
	if c.WantError {
		return
	}
	ours, theirs := before.Quality(p.CPUs), before.Quality(cpuset.MustParse(c.Want))
	if ours.NUMANodes > theirs.NUMANodes || ours.Sockets > theirs.Sockets || ours.SharedCores > theirs.SharedCores {
		t.Errorf("placement %s %+v is less aligned than Koordinator's %s %+v", p.CPUs, ours, c.Want, theirs)
	}
}
