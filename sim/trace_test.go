package sim

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/corepin/corepin/alloc"
)

const sampleTrace = `{"t": 0, "op": "arrive", "id": "enc-1", "request": {"cpus": 4, "qos": "LSE", "bind": "FullPCPUs"}}
{"t": 1.5, "op": "arrive", "id": "web", "request": {"id": "web", "cpus": 0.5}}

{"t": 2, "op": "arrive", "id": "batch", "request": {"cpus": 2, "qos": "BE"}}
{"t": 2, "op": "arrive", "id": "svc", "request": {"cpus": 2, "qos": "LSR", "exclusive": "PCPULevel", "numa": "LeastAllocated", "topology_policy": "restricted"}}
{"t": 40, "op": "depart", "id": "enc-1"}
{"t": 41, "op": "arrive", "id": "enc-1", "request": {"cpus": 2}}
`

func TestReadTrace(t *testing.T) {
	got, err := ReadTrace(strings.NewReader(sampleTrace))
	if err != nil {
		t.Fatal(err)
	}
	want := []Event{
		{T: 0, Op: Arrive, ID: "enc-1", Line: 1, Request: alloc.Request{ID: "enc-1", CPUs: 4, QoS: alloc.LSE, Bind: alloc.BindFullPCPUs}},
		{T: 1.5, Op: Arrive, ID: "web", Line: 2, Request: alloc.Request{ID: "web", MilliCPUs: 500, QoS: alloc.LS}},
		{T: 2, Op: Arrive, ID: "batch", Line: 4, Request: alloc.Request{ID: "batch", MilliCPUs: 2000, QoS: alloc.BE}},
		{T: 2, Op: Arrive, ID: "svc", Line: 5, Request: alloc.Request{ID: "svc", CPUs: 2, QoS: alloc.LSR, Exclusive: alloc.ExclusivePCPULevel,
			NUMA: alloc.LeastAllocated, TopologyPolicy: alloc.TopologyRestricted}},
		{T: 40, Op: Depart, ID: "enc-1", Line: 6},
		{T: 41, Op: Arrive, ID: "enc-1", Line: 7, Request: alloc.Request{ID: "enc-1", CPUs: 2, QoS: alloc.LSE}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("ReadTrace mismatch (-want +got):\n%s", d)
	}
}

func TestReadTraceErrors(t *testing.T) {
	arrive := `{"t": 1, "op": "arrive", "id": "a", "request": {"cpus": 2}}` + "\n"
	tests := []struct {
		name     string
		input    string
		wantLine int
		wantMsg  string
	}{
		{name: "unknown op", input: arrive + `{"t": 2, "op": "leave", "id": "a"}`, wantLine: 2, wantMsg: `unknown op "leave"`},
		{name: "missing op", input: `{"t": 2, "id": "a"}`, wantLine: 1, wantMsg: `no "op"`},
		{name: "depart of unknown id", input: arrive + `{"t": 2, "op": "depart", "id": "b"}`, wantLine: 2, wantMsg: `depart of unknown id "b"`},
		{name: "depart twice", input: arrive + `{"t": 2, "op": "depart", "id": "a"}` + "\n" + `{"t": 3, "op": "depart", "id": "a"}`, wantLine: 3, wantMsg: `depart of unknown id "a"`},
		{name: "duplicate arrive", input: arrive + "\n\n" + arrive, wantLine: 4, wantMsg: `duplicate arrive of "a"`},
		{name: "time goes backwards", input: arrive + `{"t": 0.5, "op": "depart", "id": "a"}`, wantLine: 2, wantMsg: "goes backwards"},
		{name: "negative time", input: `{"t": -1, "op": "arrive", "id": "a", "request": {"cpus": 2}}`, wantLine: 1, wantMsg: "not a finite number >= 0"},
		{name: "no time", input: `{"op": "arrive", "id": "a", "request": {"cpus": 2}}`, wantLine: 1, wantMsg: `no time "t"`},
		{name: "no id", input: `{"t": 0, "op": "arrive", "request": {"cpus": 2}}`, wantLine: 1, wantMsg: "no id"},
		{name: "unknown key", input: `{"t": 0, "op": "arrive", "id": "a", "request": {"cpus": 2}, "prio": 3}`, wantLine: 1, wantMsg: `unknown field "prio"`},
		{name: "unknown request key", input: `{"t": 0, "op": "arrive", "id": "a", "request": {"cpus": 2, "gpu": 1}}`, wantLine: 1, wantMsg: `unknown field "gpu"`},
		{name: "arrive without request", input: `{"t": 0, "op": "arrive", "id": "a"}`, wantLine: 1, wantMsg: "has no request"},
		{name: "depart with request", input: arrive + `{"t": 2, "op": "depart", "id": "a", "request": {"cpus": 2}}`, wantLine: 2, wantMsg: "carries a request"},
		{name: "request without cpus", input: `{"t": 0, "op": "arrive", "id": "a", "request": {"qos": "LSE"}}`, wantLine: 1, wantMsg: "has no cpus"},
		{name: "fractional LSE", input: `{"t": 0, "op": "arrive", "id": "a", "request": {"cpus": 1.5, "qos": "LSE"}}`, wantLine: 1, wantMsg: "takes whole CPUs"},
		{name: "zero LSE", input: `{"t": 0, "op": "arrive", "id": "a", "request": {"cpus": 0}}`, wantLine: 1, wantMsg: "at least 1 cpu"},
		{name: "system qos", input: `{"t": 0, "op": "arrive", "id": "a", "request": {"cpus": 1, "qos": "SYSTEM"}}`, wantLine: 1, wantMsg: `qos SYSTEM names the reserved CPUs`},
		{name: "unknown qos", input: `{"t": 0, "op": "arrive", "id": "a", "request": {"cpus": 1, "qos": "GOLD"}}`, wantLine: 1, wantMsg: `unknown qos "GOLD"`},
		{name: "unknown bind", input: `{"t": 0, "op": "arrive", "id": "a", "request": {"cpus": 1, "bind": "Full"}}`, wantLine: 1, wantMsg: `unknown bind policy "Full"`},
		{name: "request id differs", input: `{"t": 0, "op": "arrive", "id": "a", "request": {"id": "b", "cpus": 1}}`, wantLine: 1, wantMsg: `differs from the event id`},
		{name: "two values on a line", input: `{"t": 0, "op": "depart", "id": "a"} {"t": 0}`, wantLine: 1, wantMsg: "more than one JSON value"},
		{name: "not JSON", input: arrive + "t=3 op=depart", wantLine: 2, wantMsg: "parsing event"},
		{name: "line too long", input: arrive + `{"t": 2, "op": "depart", "id": "` + strings.Repeat("x", maxLine) + `"}`, wantLine: 2, wantMsg: "longer than"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadTrace(strings.NewReader(tc.input))
			if !errors.Is(err, ErrBadTrace) {
				t.Fatalf("ReadTrace error = %v, want ErrBadTrace", err)
			}
			var le *LineError
			if !errors.As(err, &le) || le.Line != tc.wantLine {
				t.Errorf("ReadTrace error %v: line %v, want %d", err, le, tc.wantLine)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("ReadTrace error = %q, want it to contain %q", err, tc.wantMsg)
			}
		})
	}
}

func TestWriteTraceRoundTrip(t *testing.T) {
	in, err := ReadTrace(strings.NewReader(sampleTrace))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteTrace(&buf, in); err != nil {
		t.Fatal(err)
	}
	out, err := ReadTrace(&buf)
	if err != nil {
		t.Fatalf("reading back %q: %v", buf.String(), err)
	}
	if d := cmp.Diff(in, out, cmpopts.IgnoreFields(Event{}, "Line")); d != "" {
		t.Errorf("round trip mismatch (-in +out):\n%s", d)
	}
}

// FuzzTrace checks that ReadTrace never panics and that whatever it accepts
// WriteTrace renders into a trace that reads back to the same events.
func FuzzTrace(f *testing.F) {
	f.Add([]byte(sampleTrace))
	f.Add([]byte(`{"t": 1e300, "op": "arrive", "id": "\u00e9\ud800", "request": {"cpus": 0.0005, "qos": "BE"}}`))
	f.Add([]byte(`{"t": 0, "op": "arrive", "id": "a", "request": {"cpus": 2}}` + "\n" + `{"t": 0, "op": "depart", "id": "a"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		evs, err := ReadTrace(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrBadTrace) {
				t.Fatalf("ReadTrace error %v is not ErrBadTrace", err)
			}
			return
		}
		var buf bytes.Buffer
		if err := WriteTrace(&buf, evs); err != nil {
			t.Fatal(err)
		}
		again, err := ReadTrace(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatalf("reading back %q: %v", buf.String(), err)
		}
		if d := cmp.Diff(evs, again, cmpopts.IgnoreFields(Event{}, "Line"), cmpopts.EquateEmpty()); d != "" {
			t.Fatalf("round trip mismatch (-first +again):\n%s", d)
		}
	})
}
