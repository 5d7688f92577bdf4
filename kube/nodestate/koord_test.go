package nodestate

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
)

// koordDetail is AnnotationKoordCPUTopology of a machine of the given
// sockets, one NUMA node each, cores per socket and 2 threads per core,
// numbered as lscpu numbers a two-socket Intel server: the first threads
// of every core first (cpu = core), their siblings after (cpu = cores +
// core).
func koordDetail(sockets, coresPerSocket int) string {
	type info struct {
		ID     int `json:"id"`
		Core   int `json:"core"`
		Socket int `json:"socket"`
		Node   int `json:"node"`
	}
	var d []info
	cores := sockets * coresPerSocket
	for thread := range 2 {
		for core := range cores {
			s := core / coresPerSocket
			d = append(d, info{ID: thread*cores + core, Core: core, Socket: s, Node: s})
		}
	}
	b, err := json.Marshal(map[string]any{"detail": d})
	if err != nil {
		panic(err)
	}
	return string(b)
}

// koordAnnotations are what koordlet writes for a 2-socket machine of 4
// cores each, 2 threads per core (CPUs 0-15; core c holds CPUs c and
// c+8), kubelet static with full-pcpus-only and reserved CPU 0, CPU 8
// reserved by the node, the kubelet holding 1,9 for default/web, and
// Koordinator's own pods holding 4-5,12-13 (LSE) and 6,14 (LSR): gone
// from the LS pool, 6,14 still in the BE pool.
func koordAnnotations() map[string]string {
	return map[string]string{
		AnnotationKoordCPUTopology:           koordDetail(2, 4),
		AnnotationKoordKubeletPolicy:         `{"policy":"static","options":{"full-pcpus-only":"true","distribute-cpus-across-numa":"false"},"reservedCPUs":"0"}`,
		AnnotationKoordReservation:           `{"reservedCPUs":"8"}`,
		AnnotationKoordPodCPUAllocs:          `[{"namespace":"default","name":"web","uid":"7f0c","cpuset":"1,9","managedByKubelet":true}]`,
		AnnotationKoordCPUSharedPools:        `[{"socket":0,"node":0,"cpuset":"0,2-3,10-11"},{"socket":1,"node":1,"cpuset":"7,15"}]`,
		AnnotationKoordBECPUSharedPools:      `[{"socket":0,"node":0,"cpuset":"0,2-3,10-11"},{"socket":1,"node":1,"cpuset":"6-7,14-15"}]`,
		"node.koordinator.sh/cpu-basic-info": `{"cpuModel":"Intel(R) Xeon(R)","hyperThreadEnabled":true}`,
	}
}

func TestParseKoord(t *testing.T) {
	k, err := ParseKoord(koordAnnotations())
	if err != nil {
		t.Fatal(err)
	}
	topo := k.Topology
	if got := [...]int{topo.Online().Size(), topo.NumCores(), topo.NumSockets(), len(topo.NodesWithCPUs()), topo.NumL3()}; got != [...]int{16, 8, 2, 2, 2} {
		t.Errorf("CPUs, cores, sockets, NUMA nodes, L3 = %v, want [16 8 2 2 2]", got)
	}
	if got := topo.NodeCPUs(1).String(); got != "4-7,12-15" {
		t.Errorf("NUMA node 1 CPUs = %s, want 4-7,12-15", got)
	}
	c5, _ := topo.CPU(5)
	if got := topo.CoreCPUs(c5.Core).String(); got != "5,13" {
		t.Errorf("core of CPU 5 = %s, want 5,13", got)
	}
	if diff := cmp.Diff(alloc.NodeSettings{Policy: alloc.PolicyKubelet, Options: []string{"full-pcpus-only"}}, k.Settings, cmp.Comparer(cpuset.CPUSet.Equals)); diff != "" {
		t.Errorf("settings (-want +got):\n%s", diff)
	}
	if got := k.Reserved.String(); got != "0,8" {
		t.Errorf("reserved = %s, want 0,8 (the kubelet's and the node's)", got)
	}
	want := []alloc.Assignment{
		{ID: "default/web", QoS: alloc.LSE, CPUs: cpuset.MustParse("1,9")},
		{ID: KoordLSRID, QoS: alloc.LSR, CPUs: cpuset.MustParse("6,14")},
		{ID: KoordLSEID, QoS: alloc.LSE, CPUs: cpuset.MustParse("4-5,12-13")},
	}
	if diff := cmp.Diff(want, k.Held, cmp.Comparer(func(a, b cpuset.CPUSet) bool { return a.Equals(b) })); diff != "" {
		t.Errorf("held (-want +got):\n%s", diff)
	}
}

func TestParseKoordVariants(t *testing.T) {
	base := func(over map[string]string) map[string]string {
		ann := map[string]string{AnnotationKoordCPUTopology: koordDetail(1, 4)}
		for k, v := range over {
			if v == "" {
				delete(ann, k)
				continue
			}
			ann[k] = v
		}
		return ann
	}
	eq := cmp.Comparer(func(a, b cpuset.CPUSet) bool { return a.Equals(b) })
	cases := []struct {
		name     string
		ann      map[string]string
		settings alloc.NodeSettings
		reserved string
		held     []alloc.Assignment
	}{
		{name: "detail alone", ann: base(nil), settings: alloc.NodeSettings{Policy: alloc.PolicyCorepin}},
		{name: "policy none ignores its options", ann: base(map[string]string{AnnotationKoordKubeletPolicy: `{"policy":"none","options":{"full-pcpus-only":"true"}}`}),
			settings: alloc.NodeSettings{Policy: alloc.PolicyCorepin}},
		{name: "field names in another case", ann: base(map[string]string{AnnotationKoordKubeletPolicy: `{"Policy":"static","ReservedCPUs":"1"}`,
			AnnotationKoordPodCPUAllocs: `[{"Namespace":"a","Name":"b","CPUSet":"2"}]`}),
			settings: alloc.NodeSettings{Policy: alloc.PolicyKubelet}, reserved: "1", held: []alloc.Assignment{{ID: "a/b", QoS: alloc.LSE, CPUs: cpuset.MustParse("2")}}},
		{name: "null allocs and an empty cpuset", ann: base(map[string]string{AnnotationKoordPodCPUAllocs: `null`}), settings: alloc.NodeSettings{Policy: alloc.PolicyCorepin}},
		{name: "unnamed pods", ann: base(map[string]string{AnnotationKoordPodCPUAllocs: `[{"uid":"u1","cpuset":"1"},{"cpuset":"2"},{"name":"x","cpuset":""}]`}),
			settings: alloc.NodeSettings{Policy: alloc.PolicyCorepin}, held: []alloc.Assignment{{ID: "uid/u1", QoS: alloc.LSE, CPUs: cpuset.MustParse("1")},
				{ID: AnnotationKoordPodCPUAllocs + "[1]", QoS: alloc.LSE, CPUs: cpuset.MustParse("2")}}},
		{name: "a held CPU reserved later counts as reserved", ann: base(map[string]string{AnnotationKoordReservation: `{"reservedCPUs":"1"}`,
			AnnotationKoordPodCPUAllocs: `[{"namespace":"a","name":"b","cpuset":"1-2"}]`}),
			settings: alloc.NodeSettings{Policy: alloc.PolicyCorepin}, reserved: "1", held: []alloc.Assignment{{ID: "a/b", QoS: alloc.LSE, CPUs: cpuset.MustParse("2")}}},
		{name: "system QoS exclusive by default", ann: base(map[string]string{AnnotationKoordSystemQOS: `{"cpuset":"3"}`}),
			settings: alloc.NodeSettings{Policy: alloc.PolicyCorepin}, reserved: "3"},
		{name: "system QoS not exclusive", ann: base(map[string]string{AnnotationKoordSystemQOS: `{"cpuset":"3","cpusetExclusive":false}`}),
			settings: alloc.NodeSettings{Policy: alloc.PolicyCorepin}},
		{name: "null LS pool: every other CPU held by Koordinator", ann: base(map[string]string{AnnotationKoordCPUSharedPools: `null`,
			AnnotationKoordReservation: `{"reservedCPUs":"0"}`}),
			settings: alloc.NodeSettings{Policy: alloc.PolicyCorepin}, reserved: "0", held: []alloc.Assignment{{ID: KoordLSEID, QoS: alloc.LSE, CPUs: cpuset.MustParse("1-7")}}},
		{name: "kubelet reserved CPUs stay in the LS pool", ann: base(map[string]string{AnnotationKoordKubeletPolicy: `{"policy":"static","reservedCPUs":"0"}`,
			AnnotationKoordCPUSharedPools: `[{"socket":0,"node":0,"cpuset":"0-2,4-6"}]`}),
			settings: alloc.NodeSettings{Policy: alloc.PolicyKubelet}, reserved: "0", held: []alloc.Assignment{{ID: KoordLSEID, QoS: alloc.LSE, CPUs: cpuset.MustParse("3,7")}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k, err := ParseKoord(tc.ann)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.settings, k.Settings, cmp.Comparer(cpuset.CPUSet.Equals)); diff != "" {
				t.Errorf("settings (-want +got):\n%s", diff)
			}
			if got := k.Reserved.String(); got != tc.reserved {
				t.Errorf("reserved = %q, want %q", got, tc.reserved)
			}
			if diff := cmp.Diff(tc.held, k.Held, eq); diff != "" {
				t.Errorf("held (-want +got):\n%s", diff)
			}
		})
	}
	if k, err := ParseKoord(map[string]string{AnnotationKoordPodCPUAllocs: `[]`}); k != nil || err != nil {
		t.Errorf("without %s: %v, %v; want nil, nil", AnnotationKoordCPUTopology, k, err)
	}
}

func TestParseKoordRefuses(t *testing.T) {
	detail := func(entries ...string) string { return `{"detail":[` + strings.Join(entries, ",") + `]}` }
	cpu := func(id, core, socket, node int) string {
		return fmt.Sprintf(`{"id":%d,"core":%d,"socket":%d,"node":%d}`, id, core, socket, node)
	}
	good := koordDetail(1, 4)
	cases := []struct {
		name, annotation, value, want string
	}{
		{name: "not JSON", annotation: AnnotationKoordCPUTopology, value: `{"detail":`, want: "parsing"},
		{name: "a list", annotation: AnnotationKoordCPUTopology, value: `[1]`, want: "is not an object"},
		{name: "trailing data", annotation: AnnotationKoordCPUTopology, value: good + `{}`, want: "trailing data"},
		{name: "no CPUs", annotation: AnnotationKoordCPUTopology, value: `{"detail":[]}`, want: "no CPUs"},
		{name: "null", annotation: AnnotationKoordCPUTopology, value: `null`, want: "no CPUs"},
		{name: "CPU twice", annotation: AnnotationKoordCPUTopology, value: detail(cpu(0, 0, 0, 0), cpu(0, 1, 0, 0)), want: "cpu 0 listed twice"},
		{name: "no id", annotation: AnnotationKoordCPUTopology, value: `{"detail":[{"core":0}]}`, want: "no id"},
		{name: "id out of range", annotation: AnnotationKoordCPUTopology, value: detail(cpu(70000, 0, 0, 0)), want: "id outside"},
		{name: "negative id", annotation: AnnotationKoordCPUTopology, value: detail(cpu(-1, 0, 0, 0)), want: "id outside"},
		{name: "node out of range", annotation: AnnotationKoordCPUTopology, value: detail(cpu(0, 0, 0, 5000)), want: "node 5000 outside"},
		{name: "negative socket", annotation: AnnotationKoordCPUTopology, value: detail(cpu(0, 0, -1, 0)), want: "socket -1 outside"},
		{name: "negative core", annotation: AnnotationKoordCPUTopology, value: detail(cpu(0, -3, 0, 0)), want: "core -3 outside"},
		{name: "core on two NUMA nodes", annotation: AnnotationKoordCPUTopology, value: detail(cpu(0, 0, 0, 0), cpu(1, 0, 0, 1)), want: "invalid topology"},
		{name: "too long", annotation: AnnotationKoordCPUTopology, value: `{"detail":[` + strings.Repeat(" ", MaxAnnotationBytes) + `]}`, want: "longer than"},
		{name: "allocs too long", annotation: AnnotationKoordPodCPUAllocs, value: `[` + strings.Repeat(" ", MaxAnnotationBytes) + `]`, want: "longer than"},
		{name: "held CPU not in the machine", annotation: AnnotationKoordPodCPUAllocs, value: `[{"namespace":"a","name":"b","cpuset":"6-9"}]`, want: "CPUs 8-9 are not in"},
		{name: "held twice", annotation: AnnotationKoordPodCPUAllocs, value: `[{"namespace":"a","name":"b","cpuset":"1"},{"namespace":"a","name":"c","cpuset":"1-2"}]`, want: "CPUs 1 held by two pods"},
		{name: "pod twice", annotation: AnnotationKoordPodCPUAllocs, value: `[{"namespace":"a","name":"b","cpuset":"1"},{"namespace":"a","name":"b","cpuset":"2"}]`, want: "pod a/b given twice"},
		{name: "more pods than CPUs", annotation: AnnotationKoordPodCPUAllocs, value: `[` + strings.Repeat(`{},`, 8) + `{}]`, want: "more than the 8 CPUs"},
		{name: "bad cpuset", annotation: AnnotationKoordPodCPUAllocs, value: `[{"cpuset":"3-1"}]`, want: "entry 0: cpuset"},
		{name: "allocs an object", annotation: AnnotationKoordPodCPUAllocs, value: `{"cpuset":"1"}`, want: "is not a list"},
		{name: "unknown kubelet policy", annotation: AnnotationKoordKubeletPolicy, value: `{"policy":"dynamic"}`, want: `policy "dynamic": want static or none`},
		{name: "unknown option", annotation: AnnotationKoordKubeletPolicy, value: `{"policy":"static","options":{"turbo":"true"}}`, want: "options"},
		{name: "option not a boolean", annotation: AnnotationKoordKubeletPolicy, value: `{"policy":"static","options":{"full-pcpus-only":"yes"}}`, want: `want true or false`},
		{name: "kubelet reserved outside", annotation: AnnotationKoordKubeletPolicy, value: `{"policy":"static","reservedCPUs":"0-99"}`, want: "reserved CPUs 8-99 are not in"},
		{name: "reservation outside", annotation: AnnotationKoordReservation, value: `{"reservedCPUs":"64"}`, want: "reserved CPUs 64 are not in"},
		{name: "reservation malformed", annotation: AnnotationKoordReservation, value: `{"reservedCPUs":"a"}`, want: "reservedCPUs"},
		{name: "system QoS outside", annotation: AnnotationKoordSystemQOS, value: `{"cpuset":"9"}`, want: "system QoS CPUs 9 are not in"},
		{name: "pool outside", annotation: AnnotationKoordCPUSharedPools, value: `[{"cpuset":"0-9"}]`, want: "pool CPUs 8-9 are not in"},
		{name: "pool malformed", annotation: AnnotationKoordCPUSharedPools, value: `[{"cpuset":"0-"}]`, want: "pool 0"},
		{name: "BE pool malformed", annotation: AnnotationKoordBECPUSharedPools, value: `{}`, want: "is not a list"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ann := map[string]string{AnnotationKoordCPUTopology: good, AnnotationKoordCPUSharedPools: `[{"cpuset":"0-7"}]`}
			ann[tc.annotation] = tc.value
			k, err := ParseKoord(ann)
			if !errors.Is(err, ErrKoord) || !strings.Contains(err.Error(), tc.annotation) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ParseKoord = %v, %v; want an ErrKoord error naming %s and containing %q", k, err, tc.annotation, tc.want)
			}
		})
	}
}

func TestTopologyPolicyOfNRT(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want alloc.TopologyPolicy
	}{
		{nil, ""}, {[]string{"None"}, "none"}, {[]string{"BestEffort"}, "best-effort"}, {[]string{"BestEffortPodLevel"}, "best-effort"},
		{[]string{"RestrictedContainerLevel"}, "restricted"}, {[]string{"SingleNUMANodeContainerLevel"}, "single-numa-node"},
		{[]string{"SingleNUMANodePodLevel", "SingleNUMANode"}, "single-numa-node"},
	} {
		got, err := TopologyPolicyOfNRT(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("TopologyPolicyOfNRT(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, in := range [][]string{{"single-numa-node"}, {"SingleNUMANodeNodeLevel"}, {"None", "Restricted"}, make([]string, MaxAttributes+1)} {
		if got, err := TopologyPolicyOfNRT(in); !errors.Is(err, ErrAllocator) {
			t.Errorf("TopologyPolicyOfNRT(%q) = %q, %v; want an ErrAllocator error", in, got, err)
		}
	}
}

// FuzzParseKoord feeds arbitrary annotation values to ParseKoord: nothing
// may panic, every error wraps ErrKoord, and what it accepts is
// consistent: held sets non-empty, disjoint, on the machine and off the
// reserved CPUs, under settings Check accepts.
func FuzzParseKoord(f *testing.F) {
	a := koordAnnotations()
	f.Add(a[AnnotationKoordCPUTopology], a[AnnotationKoordPodCPUAllocs], a[AnnotationKoordCPUSharedPools], a[AnnotationKoordBECPUSharedPools],
		a[AnnotationKoordKubeletPolicy], a[AnnotationKoordReservation], `{"cpuset":"2"}`)
	f.Add(koordDetail(1, 2), `null`, `null`, `null`, `{"policy":"none"}`, `{}`, `{"cpuset":"","cpusetExclusive":false}`)
	f.Add(`{"detail":[{"id":0,"core":0,"socket":0,"node":0},{"id":1,"core":0,"socket":0,"node":1}]}`, `[]`, `[]`, `[]`, `{}`, `{}`, `{}`)
	f.Add(`{"detail":[{"id":65535,"core":65535,"socket":9,"node":1023}]}`, `[{"cpuset":"65535"}]`, `[]`, ``, `{"policy":"static","options":{"align-by-socket":"true"}}`, ``, ``)
	f.Fuzz(func(t *testing.T, topo, allocs, ls, be, policy, reservation, sysqos string) {
		ann := map[string]string{AnnotationKoordCPUTopology: topo}
		for name, v := range map[string]string{AnnotationKoordPodCPUAllocs: allocs, AnnotationKoordCPUSharedPools: ls, AnnotationKoordBECPUSharedPools: be,
			AnnotationKoordKubeletPolicy: policy, AnnotationKoordReservation: reservation, AnnotationKoordSystemQOS: sysqos} {
			if v != "" {
				ann[name] = v
			}
		}
		k, err := ParseKoord(ann)
		if err != nil {
			if !errors.Is(err, ErrKoord) {
				t.Fatalf("error %v does not wrap ErrKoord", err)
			}
			return
		}
		if err := CheckAllocator(AllocatorOf(k.Settings)); err != nil {
			t.Errorf("accepted settings %+v: %v", k.Settings, err)
		}
		machine := k.Topology.Online()
		if !k.Reserved.IsSubsetOf(machine) {
			t.Errorf("reserved %s not on the machine %s", k.Reserved, machine)
		}
		var held cpuset.CPUSet
		ids := map[string]bool{}
		for _, h := range k.Held {
			if h.CPUs.IsEmpty() || !h.CPUs.IsSubsetOf(machine) || !h.CPUs.Intersection(held).IsEmpty() || !h.CPUs.Intersection(k.Reserved).IsEmpty() || ids[h.ID] {
				t.Errorf("held %+v: empty, off the machine %s, held twice, reserved %s or a repeated id", h, machine, k.Reserved)
			}
			ids[h.ID] = true
			held = held.Union(h.CPUs)
		}
		if k.Topology.NumL3() > len(k.Topology.NodesWithCPUs())*k.Topology.NumSockets() {
			t.Errorf("%d L3 for %d NUMA nodes on %d sockets", k.Topology.NumL3(), len(k.Topology.NodesWithCPUs()), k.Topology.NumSockets())
		}
	})
}
