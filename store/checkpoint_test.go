package store

import (
	"bytes"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// admitMany commits n admissions (each deleted by the next commit) with a
// request document of about 3 KB, so that the log passes SQLite's default
// auto-checkpoint (1000 pages) within a few hundred commits.
func admitMany(t *testing.T, db *DB, n int) {
	t.Helper()
	doc := []byte(`{"pad":"` + strings.Repeat("x", 3000) + `"}`)
	for i := range n / 2 {
		name := "ck-" + strconv.Itoa(i%4)
		if _, err := db.Admit(name, func([]Assignment) (Assignment, error) {
			return Assignment{Cpuset: "1", QoS: "LSE", Request: doc}, nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := db.DeleteAssignment(name); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCommitsDoNotCheckpoint: with the background checkpointer stopped,
// 1200 commits (well past SQLite's default of 1000 log pages) leave the
// main file as it was: no commit, an admission's included, copied the log
// into it (and paid its fsyncs).
func TestCommitsDoNotCheckpoint(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	db := openT(t, path)
	db.ckpt.stop()
	before := readFile(t, path)
	admitMany(t, db, 1200)
	if !bytes.Equal(readFile(t, path), before) {
		t.Fatal("the main file changed during the commits: a commit checkpointed the log")
	}
}

// TestBackgroundCheckpoint: commits are checkpointed into the main file by
// the background checkpointer, without a Close.
func TestBackgroundCheckpoint(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	db := openT(t, path)
	before := readFile(t, path)
	admitMany(t, db, 2*checkpointEvery)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if db.ckpt.runs.Load() > 0 && !bytes.Equal(readFile(t, path), before) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint reached the main file after %d commits (%d checkpoints run)", 2*checkpointEvery, db.ckpt.runs.Load())
		}
	}
}
