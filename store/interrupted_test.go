package store

import (
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/corepin/corepin/measure"
)

// deadOwner is the identity of a process that has exited and been reaped.
func deadOwner(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	id, err := measure.IdentityOf("/proc", cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	return id.String()
}

// Issue 10 §2: a run whose corepin process was killed stayed "unfinished"
// forever. Its status now says it was interrupted, and MarkInterrupted
// records it once.
func TestMarkInterrupted(t *testing.T) {
	db := openT(t, filepath.Join(t.TempDir(), "r.db"))
	self, err := NewRun("run", nil, "test", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if self.Owner == "" {
		t.Fatal("NewRun recorded no owner")
	}
	dead := deadOwner(t)
	begin := func(owner string) int64 {
		r := self
		r.Owner = owner
		id, err := db.BeginRun(r)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	running, killed, legacy, done := begin(self.Owner), begin(dead), begin(""), begin(dead)
	if err := db.FinishRun(done, time.Now()); err != nil {
		t.Fatal(err)
	}
	want := map[int64]string{running: RunRunning, killed: RunInterrupted, legacy: RunUnknown, done: RunFinished}
	check := func(when string) []Run {
		runs, err := db.Runs(RunFilter{})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range runs {
			if r.Status != want[r.ID] {
				t.Errorf("%s: run %d (owner %q) status %q, want %q", when, r.ID, r.Owner, r.Status, want[r.ID])
			}
		}
		return runs
	}
	check("before MarkInterrupted") // derived from the owner alone, as a read-only reader sees it
	ids, err := db.MarkInterrupted()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids, []int64{killed}) {
		t.Errorf("MarkInterrupted() = %v, want [%d]", ids, killed)
	}
	for _, r := range check("after MarkInterrupted") {
		if (r.ID == killed) == r.InterruptedAt.IsZero() {
			t.Errorf("run %d InterruptedAt = %v", r.ID, r.InterruptedAt)
		}
	}
	if ids, err := db.MarkInterrupted(); err != nil || len(ids) != 0 {
		t.Errorf("second MarkInterrupted() = %v, %v; want none", ids, err)
	}
}

// A file of schema 1 gains the owner columns; its unfinished runs are
// "unfinished", never guessed interrupted.
func TestMigrateSchema1Runs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v1.db")
	func() {
		replace(t, &migrations, migrations[:1])
		db := openT(t, path)
		if _, err := db.db.Exec(`INSERT INTO runs (started_at, command) VALUES (?, 'run')`, timeArg(time.Now())); err != nil {
			t.Fatal(err)
		}
		db.Close()
	}()
	replace(t, &migrations, migrations[:SchemaVersion:SchemaVersion])
	db := openT(t, path)
	runs, err := db.Runs(RunFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].Status != RunUnknown || runs[0].Owner != "" {
		t.Errorf("Runs() = %+v, want one unfinished run without owner", runs)
	}
}
