package extender

import (
	"os"
	"testing"
)

// FuzzHandlerDecode feeds arbitrary bodies to DecodeArgs and, when they
// decode, runs Filter and Prioritize on them: nothing may panic, and every
// node of the request gets exactly one answer.
func FuzzHandlerDecode(f *testing.F) {
	seed, err := os.ReadFile("testdata/filter-single-numa.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte(`{"Pod":{"metadata":{"annotations":{"scheduling.koordinator.sh/resource-spec":"{\"preferredCPUBindPolicy\":\"FullPCPUs\"}"}}},"Nodes":{"items":[{"metadata":{"name":"a","annotations":{"corepin.io/topology":"{\"cpus\":[{\"cpu\":0,\"online\":true,\"allowed\":true}]}"}}}]}}`))
	f.Add([]byte(`{"Pod":{},"NodeNames":["a"]}`))
	f.Add([]byte(`{"Pod":{},"Nodes":{"items":[{"metadata":{"name":"a","annotations":{"corepin.io/numa-free":"[4,4]","corepin.io/allocator":"{\"policy\":\"kubelet\",\"topology_policy\":\"single-numa-node\"}"}}}]}}`))
	e := New(WithMaxNodes(64))
	f.Fuzz(func(t *testing.T, body []byte) {
		args, err := DecodeArgs(body, 64)
		if err != nil {
			return
		}
		res := e.Filter(args)
		if got, want := len(res.Nodes.Items)+len(res.FailedNodes), len(args.Nodes.Items); got > want {
			t.Errorf("Filter answered %d nodes, got %d", got, want)
		}
		if got, want := len(*e.Prioritize(args)), len(args.Nodes.Items); got != want {
			t.Errorf("Prioritize scored %d nodes, want %d", got, want)
		}
		for _, p := range *e.Prioritize(args) {
			if p.Score < 0 || p.Score > 10 {
				t.Errorf("score %d of %s outside [0, 10]", p.Score, p.Host)
			}
		}
	})
}
