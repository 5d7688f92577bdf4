package jobs

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"unicode/utf8"

	"github.com/corepin/corepin/runner"
)

// ResultVersion is the version ("v") of the result a pod writes. A result
// without "v" is a marker line of an older corepin, read the same way.
const ResultVersion = 1

// The result document's place and size in a pod.
const (
	// TerminationLog is the container's termination-message file
	// (terminationMessagePath). Kubernetes copies the file into the pod's
	// status.containerStatuses[].state.terminated.message when the
	// container ends, so the result travels through the API server as data.
	// See https://kubernetes.io/docs/tasks/debug/debug-application/determine-reason-pod-failure/
	TerminationLog = "/dev/termination-log"
	// MaxMessageBytes is what Kubernetes keeps of a termination message:
	// the kubelet cuts longer ones. A result document over it is not
	// written there, and collect reads the pod's marker line instead.
	MaxMessageBytes = 4096
)

// maxDocString bounds each free-text field of the compact result (the
// command, the error, the stderr tail), so a document stays well under
// MaxMessageBytes; maxDocLeftovers bounds its leftover processes.
const (
	maxDocString    = 256
	maxDocLeftovers = 4
)

// ErrTooLarge is returned by Document for a result over MaxMessageBytes.
var ErrTooLarge = errors.New("result document larger than a termination message")

// Document returns m as the compact result document a pod writes to its
// termination message: "v" set to ResultVersion, the marker's point and
// place fields as they are, and the run's result reduced to what Collect
// records (the job's measured figures and exit; no stdout tail, the
// command, error and stderr tail cut to 256 bytes, at most 4 leftover
// processes). It returns ErrTooLarge, with the size, when the document
// still exceeds MaxMessageBytes. m itself is not changed.
func Document(m Marker) ([]byte, error) {
	m.V = ResultVersion
	if len(m.Result) > 0 && string(m.Result) != "null" {
		var j runner.JobResult
		if err := json.Unmarshal(m.Result, &j); err != nil {
			return nil, fmt.Errorf("parsing the corepin run result: %w", err)
		}
		j.StdoutTail = ""
		j.Cmd = cut(j.Cmd, maxDocString)
		j.Error = cut(j.Error, maxDocString)
		j.StderrTail = cut(j.StderrTail, maxDocString)
		if len(j.Leftovers) > maxDocLeftovers {
			j.Leftovers = j.Leftovers[:maxDocLeftovers]
		}
		r, err := json.Marshal(j)
		if err != nil {
			return nil, fmt.Errorf("encoding the compact result: %w", err)
		}
		m.Result = r
	}
	doc, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encoding the result document: %w", err)
	}
	if len(doc) > MaxMessageBytes {
		return doc, fmt.Errorf("%w: %d bytes, Kubernetes keeps %d", ErrTooLarge, len(doc), MaxMessageBytes)
	}
	return doc, nil
}

// cut shortens s to at most n bytes on a rune boundary, marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "..."
	s = s[:n-len(mark)]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + mark
}

// PodResult is what a pod's `corepin kube result` is given: the marker's
// fields as `corepin kube jobs` wrote them into the pod (Head: every field
// but pod and result), the pod's name and the file `corepin run -o json`
// wrote.
type PodResult struct {
	Head []byte
	Pod  string
	// Run is the output of `corepin run -o json`; its last non-empty line
	// is the job object. A missing or empty file gives a null result,
	// which collect reports as "printed no corepin run result".
	Run string
	// TerminationLog is where the result document goes ("" for none).
	TerminationLog string
}

// WriteResult prints the pod's marker line (MarkerPrefix and the full
// result) to log and writes the compact Document to p.TerminationLog. A
// document over MaxMessageBytes is not written (the file is left empty,
// so collect falls back to the log line) and a note goes to warn. It
// fails only on a bad head or when neither output can be written.
func WriteResult(p PodResult, log, warn io.Writer) error {
	var m Marker
	dec := json.NewDecoder(bytes.NewReader(p.Head))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return fmt.Errorf("parsing the result context: %w", err)
	}
	if dec.More() {
		return errors.New("parsing the result context: trailing data after the JSON object")
	}
	m.V, m.Pod = ResultVersion, p.Pod
	m.Result = lastJSONLine(p.Run, warn)
	line, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encoding the result line: %w", err)
	}
	if _, err := fmt.Fprintf(log, "%s%s\n", MarkerPrefix, line); err != nil {
		return fmt.Errorf("printing the result line: %w", err)
	}
	if p.TerminationLog == "" {
		return nil
	}
	doc, err := Document(m)
	if errors.Is(err, ErrTooLarge) {
		fmt.Fprintf(warn, "corepin: %v; the %s line in the log carries the result\n", err, MarkerPrefix[:len(MarkerPrefix)-1])
		return nil
	}
	if err != nil {
		fmt.Fprintf(warn, "corepin: %v; the log line carries the result\n", err)
		return nil
	}
	if err := os.WriteFile(p.TerminationLog, doc, 0o644); err != nil {
		fmt.Fprintf(warn, "corepin: writing the result document: %v; the log line carries the result\n", err)
	}
	return nil
}

// lastJSONLine returns the last non-empty line of the file at path when it
// is a JSON object, else null (with a note to warn).
func lastJSONLine(path string, warn io.Writer) json.RawMessage {
	null := json.RawMessage("null")
	f, err := os.Open(path)
	if err != nil {
		fmt.Fprintf(warn, "corepin: reading the run result: %v\n", err)
		return null
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, MaxLogBytes))
	sc.Buffer(make([]byte, 0, 64<<10), MaxLineBytes)
	var last []byte
	for sc.Scan() {
		if l := bytes.TrimSpace(sc.Bytes()); len(l) > 0 {
			last = append(last[:0], l...)
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintf(warn, "corepin: reading the run result: %v\n", err)
		return null
	}
	var obj map[string]json.RawMessage
	if len(last) == 0 || json.Unmarshal(last, &obj) != nil {
		fmt.Fprintf(warn, "corepin: corepin run printed no JSON result\n")
		return null
	}
	return last
}
