package sim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/corepin/corepin/alloc"
)

// Op is what happens to a job at an event.
type Op string

// Trace operations.
const (
	Arrive Op = "arrive" // the job asks for CPUs
	Depart Op = "depart" // the job ends and frees what it held
)

// Event is one line of a trace. Request is set for Arrive only; its ID is the
// event's ID.
type Event struct {
	T       float64
	Op      Op
	ID      string
	Request alloc.Request
	// Line is the 1-based line the event was read from; 0 when generated.
	Line int
}

// ErrBadTrace is matched (errors.Is) by every error about a malformed trace.
var ErrBadTrace = errors.New("invalid trace")

// LineError is a malformed trace line: Line is 1-based (0 when the event was
// not read from a file, then Index is its position in the slice).
type LineError struct {
	Line   int
	Index  int
	Reason string
}

func (e *LineError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("trace line %d: %s", e.Line, e.Reason)
	}
	return fmt.Sprintf("trace event %d: %s", e.Index, e.Reason)
}

// Is makes errors.Is(err, ErrBadTrace) true for every LineError.
func (e *LineError) Is(target error) bool { return target == ErrBadTrace }

// maxLine bounds one trace line; a request object is a few hundred bytes.
const maxLine = 64 << 10

type eventJSON struct {
	T       *float64           `json:"t"`
	Op      Op                 `json:"op"`
	ID      string             `json:"id"`
	Request *alloc.RequestSpec `json:"request,omitempty"`
}

// ReadTrace reads a trace in JSON lines (see the package documentation) and
// checks it with Validate. Blank lines are skipped; anything else that is
// not one well-formed event is an error naming its line.
func ReadTrace(r io.Reader) ([]Event, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLine)
	var evs []Event
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		ev, err := parseEvent(b)
		if err != nil {
			return nil, &LineError{Line: line, Index: len(evs), Reason: err.Error()}
		}
		ev.Line = line
		if len(evs) == MaxEvents {
			return nil, &LineError{Line: line, Index: len(evs), Reason: fmt.Sprintf("more than %d events in one trace", MaxEvents)}
		}
		evs = append(evs, ev)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, &LineError{Line: line + 1, Index: len(evs), Reason: fmt.Sprintf("line longer than %d bytes", maxLine)}
		}
		return nil, fmt.Errorf("reading trace: %w", err)
	}
	if err := Validate(evs); err != nil {
		return nil, err
	}
	return evs, nil
}

func parseEvent(b []byte) (Event, error) {
	var ej eventJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ej); err != nil {
		return Event{}, fmt.Errorf("parsing event: %v", err)
	}
	if dec.More() {
		return Event{}, errors.New("more than one JSON value on the line")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Event{}, errors.New("trailing data after the event")
	}
	if ej.T == nil {
		return Event{}, errors.New(`event has no time "t"`)
	}
	ev := Event{T: *ej.T, Op: ej.Op, ID: ej.ID}
	switch ej.Op {
	case Arrive:
		if ej.Request == nil {
			return Event{}, fmt.Errorf("arrive of %q has no request", ej.ID)
		}
		if ej.Request.ID != "" && ej.Request.ID != ej.ID {
			return Event{}, fmt.Errorf("request id %q differs from the event id %q", ej.Request.ID, ej.ID)
		}
		req, err := toRequest(ej.ID, *ej.Request)
		if err != nil {
			return Event{}, err
		}
		ev.Request = req
	case Depart:
		if ej.Request != nil {
			return Event{}, fmt.Errorf("depart of %q carries a request", ej.ID)
		}
	case "":
		return Event{}, errors.New(`event has no "op" (want arrive or depart)`)
	default:
		return Event{}, fmt.Errorf("unknown op %q (want arrive or depart)", ej.Op)
	}
	return ev, nil
}

// toRequest turns a request object into an alloc.Request the way
// `corepin plan` does (alloc.RequestSpec). SYSTEM is not schedulable: it
// names the reserved CPUs.
func toRequest(id string, rj alloc.RequestSpec) (alloc.Request, error) {
	if rj.QoS == string(alloc.SYSTEM) {
		return alloc.Request{}, fmt.Errorf("request of %q: qos SYSTEM names the reserved CPUs and is not scheduled", id)
	}
	r, err := rj.Request(id)
	if err != nil {
		return alloc.Request{}, err
	}
	if r.QoS == "" {
		r.QoS = alloc.LSE
	}
	return r, nil
}

// Validate checks the order of a trace: times are finite, not negative and
// never go backwards; every id is non-empty; a job arrives at most once while
// it is present and departs only after it arrived. An id may arrive again
// after its depart. Jobs still present at the end simply stay.
func Validate(evs []Event) error {
	live := map[string]bool{}
	last := 0.0
	for i, ev := range evs {
		bad := func(format string, args ...any) error {
			return &LineError{Line: ev.Line, Index: i, Reason: fmt.Sprintf(format, args...)}
		}
		switch {
		case math.IsNaN(ev.T) || math.IsInf(ev.T, 0) || ev.T < 0:
			return bad("time %v is not a finite number >= 0", ev.T)
		case ev.T < last:
			return bad("time %v goes backwards (the event before is at %v)", ev.T, last)
		case ev.ID == "":
			return bad("event has no id")
		}
		last = ev.T
		switch ev.Op {
		case Arrive:
			if live[ev.ID] {
				return bad("duplicate arrive of %q (it has not departed)", ev.ID)
			}
			if ev.Request.ID != ev.ID {
				return bad("request id %q differs from the event id %q", ev.Request.ID, ev.ID)
			}
			live[ev.ID] = true
		case Depart:
			if !live[ev.ID] {
				return bad("depart of unknown id %q (no arrive before it)", ev.ID)
			}
			delete(live, ev.ID)
		default:
			return bad("unknown op %q (want arrive or depart)", ev.Op)
		}
	}
	return nil
}

// WriteTrace writes evs as JSON lines that ReadTrace reads back to the same
// events (Line aside).
func WriteTrace(w io.Writer, evs []Event) error {
	bw := bufio.NewWriter(w)
	var buf []byte
	for _, ev := range evs {
		buf = appendEvent(buf[:0], ev)
		if _, err := bw.Write(buf); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// appendEvent renders one event with a stable key order and no HTML escaping
// surprises (ids are quoted with strconv, which json reads back the same).
func appendEvent(b []byte, ev Event) []byte {
	b = append(b, `{"t":`...)
	b = strconv.AppendFloat(b, ev.T, 'f', -1, 64)
	b = append(b, `,"op":`...)
	b = appendJSONString(b, string(ev.Op))
	b = append(b, `,"id":`...)
	b = appendJSONString(b, ev.ID)
	if ev.Op == Arrive {
		r := ev.Request
		cpus := float64(r.CPUs)
		if r.QoS == alloc.LS || r.QoS == alloc.BE {
			cpus = float64(r.MilliCPUs) / 1000
		}
		b = append(b, `,"request":{"cpus":`...)
		b = strconv.AppendFloat(b, cpus, 'f', -1, 64)
		for _, kv := range []struct{ k, v string }{
			{"qos", string(r.QoS)}, {"bind", string(r.Bind)}, {"exclusive", string(r.Exclusive)},
			{"numa", string(r.NUMA)}, {"topology_policy", string(r.TopologyPolicy)},
		} {
			if kv.v != "" {
				b = append(b, `,"`+kv.k+`":`...)
				b = appendJSONString(b, kv.v)
			}
		}
		b = append(b, '}')
	}
	return append(b, "}\n"...)
}

func appendJSONString(b []byte, s string) []byte {
	q, err := json.Marshal(s)
	if err != nil { // a string always marshals
		panic(err)
	}
	return append(b, q...)
}
