package alloc

import "testing"

func TestNodeSettingsApply(t *testing.T) {
	koord := NodeSettings{Bind: BindFullPCPUs, NUMA: LeastAllocated, TopologyPolicy: TopologySingleNUMANode}
	tests := []struct {
		name string
		s    NodeSettings
		in   Request
		want Request
	}{
		{"no settings: topology policy none", NodeSettings{}, Request{CPUs: 2}, Request{CPUs: 2, TopologyPolicy: TopologyNone}},
		{"node default policy", koord, Request{CPUs: 2, QoS: LSE},
			Request{CPUs: 2, QoS: LSE, TopologyPolicy: TopologySingleNUMANode, Bind: BindFullPCPUs, NUMA: LeastAllocated}},
		{"request's own policy wins", koord, Request{CPUs: 2, QoS: LSR, TopologyPolicy: TopologyBestEffort},
			Request{CPUs: 2, QoS: LSR, TopologyPolicy: TopologyBestEffort, Bind: BindFullPCPUs, NUMA: LeastAllocated}},
		{"no class is LSE", koord, Request{CPUs: 1}, Request{CPUs: 1, TopologyPolicy: TopologySingleNUMANode, Bind: BindFullPCPUs, NUMA: LeastAllocated}},
		{"shared classes keep their bind", koord, Request{MilliCPUs: 500, QoS: LS, Bind: BindSpreadByPCPUs},
			Request{MilliCPUs: 500, QoS: LS, Bind: BindSpreadByPCPUs, TopologyPolicy: TopologySingleNUMANode}},
		{"kubelet engine drops bind, exclusive, NUMA", NodeSettings{Policy: PolicyKubelet, Bind: BindFullPCPUs},
			Request{CPUs: 2, QoS: LSE, Bind: BindSpreadByPCPUs, Exclusive: ExclusivePCPULevel, NUMA: MostAllocated},
			Request{CPUs: 2, QoS: LSE, TopologyPolicy: TopologyNone}},
	}
	for _, tc := range tests {
		if got := tc.s.Apply(tc.in); got.TopologyPolicy != tc.want.TopologyPolicy || got.Bind != tc.want.Bind ||
			got.NUMA != tc.want.NUMA || got.Exclusive != tc.want.Exclusive || got.CPUs != tc.want.CPUs || got.QoS != tc.want.QoS {
			t.Errorf("%s: Apply(%+v) = %+v, want %+v", tc.name, tc.in, got, tc.want)
		}
	}
}
