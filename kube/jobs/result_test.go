package jobs

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/proc"
	"github.com/corepin/corepin/runner"
	"github.com/corepin/corepin/topology"
)

// node256 is a large node: 2 sockets, 8 NUMA nodes, 16 L3 groups, 256 CPUs.
func node256() *topology.Topology {
	return topology.MustSynthetic(topology.Shape{Sockets: 2, NodesPerSocket: 4, L3PerNode: 2, CoresPerL3: 8, ThreadsPerCore: 2})
}

// worstRun is a `corepin run -o json` result with every field at its
// largest realistic size: a 256-CPU node's every other CPU used, a long
// transcode command, an error, a stderr tail, leftovers and a stdout tail.
func worstRun(t *testing.T) json.RawMessage {
	t.Helper()
	var b cpuset.Builder
	for c := 0; c < 256; c += 2 {
		b.Add(c)
	}
	every := b.Result().String()
	psi := 12345.678901
	var j runner.JobResult
	j.Job, j.Cmd, j.Mode, j.QoS, j.CPUs, j.Threads = 0, "corepin workload transcode "+strings.Repeat("--arg value ", 100), "unbounded", "LS", 128, 128
	j.Cpuset, j.CPUsUsed = every, every
	j.WallS, j.UserS, j.SysS, j.MaxRSSKB = 123456.789012, 9876543.21098, 12345.6789, 1<<40
	j.Migrations, j.CtxSwitches, j.RunDelayS, j.ThrottledPeriods, j.ThrottledS, j.NrPeriods = 1<<40, 1<<40, 12345.6789, 1<<40, 12345.6789, 1<<40
	j.ExitCode, j.Signal, j.StderrTail = 137, "SIGKILL", strings.Repeat("ffmpeg: error decoding frame\n", 200)
	fps, ops := 1234.5678, 9876543.21
	j.FramesPerS, j.OpsPerS = &fps, &ops
	j.Error, j.StdoutTail = strings.Repeat("the job failed because ", 100), strings.Repeat("x", 8192)
	j.FPS, j.OpsPerSec, j.Frames, j.Ops = fps, ops, 1<<40, 1<<50
	j.PSISomeS, j.PSIFullS, j.PSIScope = &psi, &psi, proc.PSIGroup
	for i := range 50 {
		j.Leftovers = append(j.Leftovers, proc.Leftover{PID: 4000000 + i, Comm: "ffmpeg-worker-1"})
	}
	r, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestDocumentFitsEverySweep checks that the result document of every
// sweep's largest point (the full sweep, transcode, a 256-CPU node, the
// largest index and repeat, a pod name of 63 characters) with the worst
// realistic run result fits a termination message.
func TestDocumentFitsEverySweep(t *testing.T) {
	run := worstRun(t)
	pod := strings.Repeat("p", 63)
	for _, sweep := range catalog.Names() {
		t.Run(sweep, func(t *testing.T) {
			spec := []byte(sweep + ":\n  job:\n    workload: transcode\n")
			s, err := Plan(Options{Experiments: catalog, Sweep: sweep, Spec: spec, Node: node256(), Repeats: 1})
			if err != nil {
				t.Fatal(err)
			}
			largest := 0
			for _, j := range s.Jobs {
				pj, err := json.Marshal(j.Point)
				if err != nil {
					t.Fatal(err)
				}
				m := Marker{Sweep: s.Name, Index: MaxJobs, Repeat: MaxRepeats - 1, Point: pj, Pods: j.Pods, Quick: false,
					Repeats: MaxRepeats, Topology: s.TopologySummary, Spec: s.Spec, Pod: pod, Result: run}
				doc, err := Document(m)
				if err != nil {
					t.Fatalf("Document(point %s) error = %v", j.Point.Label(), err)
				}
				largest = max(largest, len(doc))
				c := Collection{Experiments: catalog}
				if err := c.AddDocument(pod, doc); err != nil || c.Results() != 1 {
					t.Fatalf("AddDocument(the document of point %s) = %v, %d results; want it kept", j.Point.Label(), err, c.Results())
				}
				if got := c.results[0].job; got.WallS != 123456.789012 || got.CPUsUsed == "" || len(got.Cmd) > maxDocString || got.StdoutTail != "" {
					t.Fatalf("kept job %+v: want the figures, a command of at most %d bytes and no stdout tail", got.Row(), maxDocString)
				}
			}
			t.Logf("largest %s result document: %d of %d bytes", sweep, largest, MaxMessageBytes)
		})
	}
}

// TestWriteResultTooLarge: a result document over MaxMessageBytes is not
// written (the termination message stays empty, a note says why) and the
// log line still carries the result, which collect then reads.
func TestWriteResultTooLarge(t *testing.T) {
	dir := t.TempDir()
	runFile := filepath.Join(dir, "run.json")
	// The CPUs a job used on a node of 2048 CPUs and more, every other
	// one: a list longer than a termination message.
	var every cpuset.Builder
	for c := 0; c < 2048; c += 2 {
		every.Add(c)
	}
	term := filepath.Join(dir, "termination-log")
	head := []byte(`{"sweep":"threads","index":0,"repeat":0,"point":{"cpus":"4","threads":"1"},"pods":1,"quick":true,"repeats":1,"topology":"16 CPUs","spec":{}}`)
	for _, tc := range []struct {
		name    string
		used    string
		written bool
	}{
		{name: "fits", used: "0-15", written: true},
		{name: "too large", used: every.Result().String(), written: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := `{"job":0,"mode":"unbounded","wall_s":2,"ops":10,"exit_code":0,"cpus_used":"` + tc.used + `"}`
			if err := os.WriteFile(runFile, []byte("noise\n"+run+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(term, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			var log, warn bytes.Buffer
			if err := WriteResult(PodResult{Head: head, Pod: "pod-a", Run: runFile, TerminationLog: term}, &log, &warn); err != nil {
				t.Fatalf("WriteResult() error = %v", err)
			}
			msg, err := os.ReadFile(term)
			if err != nil {
				t.Fatal(err)
			}
			c := Collection{Experiments: catalog}
			err = c.AddDocument("pod-a", msg)
			if tc.written != (err == nil) || tc.written != (len(msg) > 0) {
				t.Errorf("termination message of %d bytes, AddDocument() error = %v; want written = %v", len(msg), err, tc.written)
			}
			if !tc.written && !strings.Contains(warn.String(), "larger than a termination message") {
				t.Errorf("stderr %q, want a note that the document is too large", warn.String())
			}
			fromLog := Collection{Experiments: catalog}
			fromLog.Add("pod-a", &log)
			if fromLog.Results() != 1 || fromLog.results[0].job.Ops != 10 || fromLog.results[0].m.Pod != "pod-a" {
				t.Errorf("log %q: %d results (skipped %+v), want the run's result", log.String(), fromLog.Results(), fromLog.Skipped)
			}
		})
	}
	if _, err := Document(Marker{Sweep: "threads", Topology: strings.Repeat("t", MaxMessageBytes)}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Document(a marker over %d bytes) error = %v, want ErrTooLarge", MaxMessageBytes, err)
	}
}

func TestWriteResultRefusesBadContext(t *testing.T) {
	for _, head := range []string{``, `{`, `{"sweep":"threads","bogus":1}`, `{"sweep":"threads"} {}`} {
		var log, warn bytes.Buffer
		err := WriteResult(PodResult{Head: []byte(head), Pod: "p", Run: "/nonexistent"}, &log, &warn)
		if err == nil || log.Len() != 0 {
			t.Errorf("WriteResult(context %q) = %v, log %q; want an error and no log line", head, err, log.String())
		}
	}
}

func TestAddDocumentRefuses(t *testing.T) {
	good := `{"v":1,"sweep":"threads","index":0,"repeat":0,"point":{"cpus":"4","threads":"4"},"pods":1,"quick":true,"repeats":1,"topology":"x","spec":{},"pod":"p","result":{"job":0,"mode":"unbounded","wall_s":1}}`
	tests := []struct {
		name, doc, reason string
	}{
		{name: "empty", doc: "", reason: "no result document"},
		{name: "kubelet text", doc: "Error: OOMKilled", reason: "parsing the result line"},
		{name: "log line without version", doc: strings.Replace(good, `"v":1,`, "", 1), reason: "not a result document"},
		{name: "future version", doc: strings.Replace(good, `"v":1`, `"v":2`, 1), reason: "result version 2"},
		{name: "too long", doc: good + strings.Repeat(" ", MaxMessageBytes), reason: "more than the 4096"},
		{name: "failed run", doc: strings.Replace(good, `{"job":0,"mode":"unbounded","wall_s":1}`, "null", 1), reason: "printed no corepin run result"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := Collection{Experiments: catalog}
			err := c.AddDocument("p", []byte(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.reason) || c.Results() != 0 || len(c.Skipped) != 0 {
				t.Errorf("AddDocument() = %v, %d results, %d skipped; want an error containing %q and nothing kept", err, c.Results(), len(c.Skipped), tc.reason)
			}
		})
	}
	c := Collection{Experiments: catalog}
	if err := c.AddDocument("p", []byte(good)); err != nil || c.Results() != 1 {
		t.Errorf("AddDocument(good) = %v, %d results; want it kept", err, c.Results())
	}
}

// FuzzAddDocument: any termination message is kept as one result or
// refused with an error; nothing panics and a refusal keeps nothing.
func FuzzAddDocument(f *testing.F) {
	f.Add([]byte(`{"v":1,"sweep":"threads","index":0,"repeat":0,"point":{"cpus":"4","threads":"4"},"pods":1,"quick":true,"repeats":1,"topology":"x","spec":{},"pod":"p","result":{"job":0,"mode":"unbounded","wall_s":1,"ops":5}}`))
	f.Add([]byte(`{"v":1,"sweep":"concurrency","result":null}`))
	f.Add([]byte("Error: OOMKilled"))
	f.Fuzz(func(t *testing.T, doc []byte) {
		c := Collection{Experiments: catalog}
		err := c.AddDocument("fuzz", doc)
		if (err == nil) != (c.Results() == 1) || len(c.Skipped) != 0 {
			t.Fatalf("AddDocument(%q) = %v with %d results, %d skipped", doc, err, c.Results(), len(c.Skipped))
		}
		if err == nil {
			if _, err := Document(c.results[0].m); err != nil && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("a kept document does not encode again: %v", err)
			}
		}
	})
}
