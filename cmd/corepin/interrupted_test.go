package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corepin/corepin/internal/testutil"
)

// Issue 10 §2: a killed run stayed "unfinished" in results forever. After
// SIGKILL of corepin run, results calls it interrupted, and the next run
// says so once.
func TestKilledRunIsInterrupted(t *testing.T) {
	requireCgroupRoot(t)
	db := filepath.Join(t.TempDir(), "r.db")
	cmd := exec.Command(binary, "run", "--db", db, "--jobs", "1", "--cpus", "1", "--mode", "unbounded", "--", "sleep", "2")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	type runJSON struct {
		ID     int64  `json:"id"`
		Status string `json:"status"`
	}
	runs := func() []runJSON {
		out, errOut, code := run(t, "results", "--db", db, "-o", "json")
		if code != 0 {
			return nil // the database may not exist yet
		}
		var doc struct {
			Runs []runJSON `json:"runs"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("decoding results %q: %v (stderr %q)", out, err, errOut)
		}
		return doc.Runs
	}
	deadline := time.Now().Add(testutil.Patience)
	for len(runs()) == 0 {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatal("the run never appeared in results")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if rs := runs(); rs[0].Status != "running" {
		t.Errorf("status while running = %q, want running", rs[0].Status)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if rs := runs(); len(rs) != 1 || rs[0].Status != "interrupted" {
		t.Fatalf("results after SIGKILL = %+v, want one interrupted run", rs)
	}
	_, errOut, code := run(t, "run", "--db", db, "--jobs", "1", "--cpus", "1", "--mode", "unbounded", "--", "true")
	if code != 0 {
		t.Fatalf("next run: exit %d: %s", code, errOut)
	}
	if !strings.Contains(errOut, "run 1 was interrupted") {
		t.Errorf("next run's stderr %q does not say run 1 was interrupted", errOut)
	}
	if rs := runs(); len(rs) != 2 || rs[0].Status != "interrupted" || rs[1].Status != "finished" {
		t.Errorf("results = %+v, want run 1 interrupted, run 2 finished", rs)
	}
}
