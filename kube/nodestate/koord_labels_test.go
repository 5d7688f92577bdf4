package nodestate

import (
	"errors"
	"strings"
	"testing"

	"github.com/corepin/corepin/alloc"
)

func TestParseKoordLabels(t *testing.T) {
	cases := []struct {
		name, bind, numa string
		want             KoordLabels
		err              string // in the error; "" for none
	}{
		{name: "none"},
		{name: "bind None", bind: "None"},
		{name: "FullPCPUsOnly", bind: "FullPCPUsOnly", want: KoordLabels{Bind: alloc.BindFullPCPUs}},
		{name: "SpreadByPCPUs", bind: "SpreadByPCPUs", want: KoordLabels{Bind: alloc.BindSpreadByPCPUs}},
		{name: "numa None is set", numa: "None", want: KoordLabels{TopologyPolicy: alloc.TopologyNone}},
		{name: "BestEffort", numa: "BestEffort", want: KoordLabels{TopologyPolicy: alloc.TopologyBestEffort}},
		{name: "Restricted", numa: "Restricted", want: KoordLabels{TopologyPolicy: alloc.TopologyRestricted}},
		{name: "both", bind: "FullPCPUsOnly", numa: "SingleNUMANode", want: KoordLabels{Bind: alloc.BindFullPCPUs, TopologyPolicy: alloc.TopologySingleNUMANode}},
		{name: "bind pod vocabulary", bind: "FullPCPUs", err: LabelKoordCPUBindPolicy + ` "FullPCPUs": want None, FullPCPUsOnly, SpreadByPCPUs or empty`},
		{name: "bind old name", bind: "PCPUOnly", err: `"PCPUOnly"`},
		{name: "bind case", bind: "none", err: `"none"`},
		{name: "numa kubelet vocabulary", numa: "single-numa-node", err: LabelKoordNUMATopologyPolicy + ` "single-numa-node": want None, BestEffort, Restricted, SingleNUMANode or empty`},
		{name: "numa scoped", numa: "SingleNUMANodeContainerLevel", err: "SingleNUMANodeContainerLevel"},
		{name: "bad bind, good numa", bind: "x", numa: "Restricted", err: LabelKoordCPUBindPolicy},
		{name: "long", numa: strings.Repeat("y", 1000), err: `yyy...": want`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseKoordLabels(tc.bind, tc.numa, "")
			if tc.err != "" {
				if !errors.Is(err, ErrKoordLabel) || !strings.Contains(err.Error(), tc.err) || len(err.Error()) > 300 {
					t.Fatalf("ParseKoordLabels(%.20q, %.20q) = %v, %v; want an ErrKoordLabel error saying %q, bounded", tc.bind, tc.numa, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseKoordLabels(%q, %q) = %+v, %v; want %+v", tc.bind, tc.numa, got, err, tc.want)
			}
		})
	}
}
