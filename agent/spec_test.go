package agent

import (
	"errors"
	"github.com/corepin/corepin/nodecore"
	"strings"
	"testing"

	"github.com/corepin/corepin/alloc"
)

func TestDecodeSpec(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		wantErr    error
		wantIn     string // in the error message
	}{
		{name: "command", body: `{"name":"enc-1","qos":"LSE","cpus":2,"command":"ffmpeg","args":["-i","x"]}`},
		{name: "pid", body: `{"name":"web","cpus":0.5,"pid":4242}`},
		{name: "cgroup", body: `{"name":"box","cpus":1,"cgroup":"/docker/abc"}`},
		// Regression (fuzz corpus 8296a81afb43ac16): encoding/json matches
		// keys case-insensitively, so "nAme" filled Name.
		{name: "key in another case", body: `{"nAme":"00","cpus":1,"command":"0"}`, wantErr: ErrInvalid, wantIn: `unknown field "nAme"`},
		{name: "duplicate key", body: `{"name":"a","name":"b","cpus":1,"command":"x"}`, wantErr: ErrInvalid, wantIn: "twice"},
		{name: "unknown field", body: `{"name":"a","cpus":1,"command":"x","prio":1}`, wantErr: ErrInvalid, wantIn: "unknown field"},
		{name: "trailing data", body: `{"name":"a","cpus":1,"command":"x"} {}`, wantErr: ErrInvalid},
		{name: "traversal name", body: `{"name":"../etc","cpus":1,"command":"x"}`, wantErr: ErrInvalid, wantIn: "name"},
		{name: "unknown qos", body: `{"name":"a","qos":"GOLD","cpus":1,"command":"x"}`, wantErr: ErrInvalid, wantIn: "unknown qos"},
		{name: "fraction for LSE", body: `{"name":"a","qos":"LSE","cpus":1.5,"command":"x"}`, wantErr: ErrInvalid, wantIn: "whole CPUs"},
		{name: "impossible size", body: `{"name":"a","cpus":1e12,"command":"x"}`, wantErr: ErrInvalid, wantIn: "outside"},
		{name: "no source", body: `{"name":"a","cpus":1}`, wantErr: ErrInvalid, wantIn: "exactly one"},
		{name: "two sources", body: `{"name":"a","cpus":1,"pid":9,"command":"x"}`, wantErr: ErrInvalid, wantIn: "exactly one"},
		{name: "cgroup traversal", body: `{"name":"a","cpus":1,"cgroup":"a/../../b"}`, wantErr: ErrInvalid, wantIn: ".."},
		{name: "isolated require", body: `{"name":"rt","qos":"LSE","cpus":2,"isolated":"require","command":"x"}`},
		{name: "isolated unknown", body: `{"name":"rt","qos":"LSE","cpus":2,"isolated":"always","command":"x"}`, wantErr: ErrInvalid, wantIn: "unknown isolated policy"},
		{name: "isolated for LS", body: `{"name":"web","qos":"LS","cpus":0.5,"isolated":"prefer","command":"x"}`, wantErr: ErrInvalid, wantIn: "exclusive requests"},
		{name: "SYSTEM", body: `{"name":"a","qos":"SYSTEM","cpus":1,"command":"x"}`, wantErr: ErrInvalid, wantIn: "reserved"},
		{name: "LS quota at the minimum", body: `{"name":"a","qos":"LS","cpus":0.01,"command":"x"}`},
		// Issue 17 §5: raised to 0.01 silently before.
		{name: "LS quota below the minimum", body: `{"name":"a","qos":"LS","cpus":0.005,"command":"x"}`, wantErr: ErrInvalid, wantIn: "at least 0.01"},
		{name: "implicit LS below the minimum", body: `{"name":"a","cpus":0.001,"command":"x"}`, wantErr: ErrInvalid, wantIn: "at least 0.01"},
		{name: "BE with no quota", body: `{"name":"a","qos":"BE","cpus":0,"command":"x"}`},
		// Issue 27 §3.1: a size that rounds to 0 is not "no quota".
		{name: "BE below the smallest size", body: `{"name":"a","qos":"BE","cpus":1e-9,"command":"x"}`, wantErr: ErrInvalid, wantIn: "above 0 but below 0.001"},
		{name: "LS 1e-9 names the kernel's minimum", body: `{"name":"a","qos":"LS","cpus":1e-9,"command":"x"}`, wantErr: ErrInvalid,
			wantIn: "an LS quota of 1e-09 CPUs is below the minimum, 0.01 CPUs (the kernel's shortest quota, 1ms per 100ms period)"},
		{name: "LS 0 names the kernel's minimum", body: `{"name":"a","qos":"LS","cpus":0,"command":"x"}`, wantErr: ErrInvalid, wantIn: "an LS quota of 0 CPUs is below the minimum"},
		{name: "huge", body: `{"name":"a","cpus":1,"command":"` + strings.Repeat("x", MaxBody) + `"}`, wantErr: ErrTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeSpec(strings.NewReader(tc.body))
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("DecodeSpec = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("DecodeSpec = %v, want %v", err, tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantIn) {
				t.Errorf("DecodeSpec = %q, want it to mention %q", err, tc.wantIn)
			}
		})
	}
}

// An isolated policy reaches the allocator's request.
func TestSpecIsolatedReachesRequest(t *testing.T) {
	s, err := DecodeSpec(strings.NewReader(`{"name":"rt","qos":"LSE","cpus":2,"isolated":"require","command":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	r, err := nodecore.Request(alloc.NodeSettings{}, s)
	if err != nil || r.Isolated != alloc.IsolatedRequire {
		t.Errorf("request() = %+v, %v; want Isolated require", r, err)
	}
}
