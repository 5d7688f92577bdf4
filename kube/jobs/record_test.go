package jobs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// AddDir reads every regular file of a directory as one pod's log: a
// subdirectory is not read, a log without a result is skipped by name.
func TestAddDir(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("pod-a", "hello\n")
	write("pod-b", "no marker either\n")
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := Collection{Experiments: catalog}
	if err := c.AddDir(dir); err != nil {
		t.Fatal(err)
	}
	var logs []string
	for _, s := range c.Skipped {
		logs = append(logs, s.Log)
	}
	if got := strings.Join(logs, ","); got != "pod-a,pod-b" {
		t.Errorf("skipped logs %q, want pod-a,pod-b (the subdirectory not read)", got)
	}
	if err := c.AddDir(filepath.Join(dir, "missing")); err == nil {
		t.Errorf("AddDir(missing) = nil, want an error")
	}
}

// Failure says what went wrong with a run's Jobs, first what matters most,
// and nothing when every Job completed.
func TestRunSummaryFailure(t *testing.T) {
	s := &Sweep{Name: "threads"}
	done := Outcome{Job: "j0", Status: StatusComplete}
	failed := Outcome{Job: "j1", Status: StatusFailed, Reason: "pod p: OOMKilled"}
	late := Outcome{Job: "j2", Status: StatusTimeout, Reason: "not finished"}
	tests := []struct {
		name        string
		sum         RunSummary
		runErr      error
		interrupted bool
		want        string
	}{
		{name: "all complete", sum: RunSummary{Outcomes: []Outcome{done}}},
		{name: "interrupted", sum: RunSummary{Outcomes: []Outcome{done}, Left: "j1"}, interrupted: true, want: "interrupted: Job j1 left running; 1 Jobs ended"},
		{name: "cluster error", sum: RunSummary{Outcomes: []Outcome{done}}, runErr: errors.New("forbidden"), want: "running the threads sweep in namespace bench of https://k (the Jobs that ended are recorded): forbidden"},
		{name: "stopped by a failure", sum: RunSummary{Outcomes: []Outcome{done, failed}, Stopped: "j1"}, want: "Job j1 failed: pod p: OOMKilled (fix the cause, delete it (kubectl delete job j1 -n bench)"},
		{name: "stopped by a timeout", sum: RunSummary{Outcomes: []Outcome{late}, Stopped: "j2"}, want: "run the same command again to wait for it"},
		{name: "kept going", sum: RunSummary{Outcomes: []Outcome{failed, done, late}}, want: "2 of 3 Jobs did not complete: j1 failed: pod p: OOMKilled; j2 timeout: not finished"},
		{name: "nothing ended", sum: RunSummary{}, want: "no Job ended"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.sum.Failure(s, "bench", "https://k", tc.runErr, tc.interrupted)
			if tc.want == "" {
				if err != nil {
					t.Errorf("Failure() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Failure() = %v, want one containing %q", err, tc.want)
			}
		})
	}
}
