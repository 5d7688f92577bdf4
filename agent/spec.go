package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/corepin/corepin/nodecore"
)

// The agent's sentinel errors are nodecore's, whichever door admits.
// HTTP maps ErrInvalid to 422, ErrExists, ErrRejected and ErrTaken to
// 409, ErrNotFound to 404, ErrDiskFull to 507.
var (
	ErrInvalid  = nodecore.ErrInvalid
	ErrExists   = nodecore.ErrExists
	ErrNotFound = nodecore.ErrNotFound
	ErrRejected = nodecore.ErrRejected
	ErrDiskFull = nodecore.ErrDiskFull
	ErrTaken    = nodecore.ErrTaken
	// ErrTooLarge means a request body exceeds MaxBody (HTTP 413).
	ErrTooLarge = fmt.Errorf("%w: request body larger than %d bytes", ErrInvalid, MaxBody)
)

// Bounds of a request.
const (
	// MaxBody is the largest request body the API reads.
	MaxBody = 64 << 10
	// MaxArgs bounds the command line of a workload the agent starts.
	MaxArgs = nodecore.MaxArgs
	// MaxNameLen bounds a workload name (a cgroup directory name part).
	MaxNameLen = nodecore.MaxNameLen
)

// Spec is a workload as a client asks for it: POST /v1/workloads
// (nodecore.Spec, the request every door admits).
type Spec = nodecore.Spec

// DecodeSpec reads one JSON Spec from r: at most MaxBody bytes, no unknown
// fields, nothing after the object. Errors wrap ErrInvalid.
func DecodeSpec(r io.Reader) (Spec, error) {
	var s Spec
	if err := decodeObject(r, specKeys, &s); err != nil {
		return Spec{}, err
	}
	if len(s.Args) == 0 {
		s.Args = nil
	}
	if err := s.Validate(); err != nil {
		return Spec{}, err
	}
	return s, nil
}

// specKeys are the JSON keys of Spec, spelled exactly.
var specKeys = map[string]bool{"name": true, "qos": true, "cpus": true, "bind": true, "exclusive": true, "numa": true,
	"topology_policy": true, "isolated": true, "command": true, "args": true, "pid": true, "cgroup": true, "sched": true, "irq_isolate": true,
	"load_balance": true, "cpu_quota": true}

// ResizeSpec is the body of PATCH /v1/workloads/{name}: the workload's
// new size, whole CPUs for LSE and LSR, a quota for LS and BE (as a
// Spec's cpus).
type ResizeSpec struct {
	CPUs *float64 `json:"cpus"`
}

// DecodeResize reads one JSON ResizeSpec from r, as DecodeSpec reads a
// Spec: at most MaxBody bytes, no key but cpus, which is required.
// Errors wrap ErrInvalid.
func DecodeResize(r io.Reader) (ResizeSpec, error) {
	var rs ResizeSpec
	if err := decodeObject(r, resizeKeys, &rs); err != nil {
		return ResizeSpec{}, err
	}
	if rs.CPUs == nil {
		return ResizeSpec{}, fmt.Errorf(`%w: a resize needs "cpus", the new size (e.g. {"cpus": 4})`, ErrInvalid)
	}
	return rs, nil
}

var resizeKeys = map[string]bool{"cpus": true}

// decodeObject reads one JSON object with only the keys known, each once
// and spelled exactly, into out: at most MaxBody bytes (ErrTooLarge),
// nothing after the object. Errors wrap ErrInvalid.
func decodeObject(r io.Reader, known map[string]bool, out any) error {
	body, err := io.ReadAll(io.LimitReader(r, MaxBody+1))
	var mbe *http.MaxBytesError
	if len(body) > MaxBody || errors.As(err, &mbe) {
		return ErrTooLarge
	}
	if err != nil {
		return fmt.Errorf("%w: reading the body: %v", ErrInvalid, err)
	}
	if err := checkKeys(body, known); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("%w: decoding JSON: %v", ErrInvalid, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: decoding JSON: data after the object", ErrInvalid)
	}
	return nil
}

// checkKeys refuses what encoding/json would let through: keys in another
// case ("Name" fills Name) and a key given twice (the last would win).
func checkKeys(body []byte, known map[string]bool) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return fmt.Errorf("%w: decoding JSON: want one object", ErrInvalid)
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return fmt.Errorf("%w: decoding JSON: %v", ErrInvalid, err)
		}
		k, _ := t.(string)
		if !known[k] {
			return fmt.Errorf("%w: decoding JSON: unknown field %q", ErrInvalid, k)
		}
		if seen[k] {
			return fmt.Errorf("%w: decoding JSON: field %q given twice", ErrInvalid, k)
		}
		seen[k] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return fmt.Errorf("%w: decoding JSON: %v", ErrInvalid, err)
		}
	}
	return nil
}
