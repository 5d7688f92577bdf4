package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A tiny bench run end to end: experiments measured in cgroups, the text
// summary, the results database, the HTML report, and corepin report
// rebuilding it from the database.
func TestBenchEndToEnd(t *testing.T) {
	requireCgroupRoot(t)
	dir := t.TempDir()
	spec := filepath.Join(dir, "tiny.yaml")
	if err := os.WriteFile(spec, []byte(`
concurrency:
  job: {workload: spin, job_seconds: 0.1}
  modes: [pinned, quota]
  concurrency: [1, 2]
  cpus: [1]
colocation:
  services: [cpu]
  policies: [alone, none, corepin, qos, suppress-quota]
  warmup: 200ms
  duration: 1s
`), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "r.db")
	out, errOut, code := run(t, "bench", "concurrency", "colocation", "--quick", "--repeats", "2", "--spec", spec,
		"--db", db, "--report-dir", filepath.Join(dir, "report"), "--seed", "1")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{"== concurrency", "penalty", "== colocation", "p99 / alone", "Recommendation:", "Report: ",
		"Colocation controller actions", "suppress-quota"} {
		if !strings.Contains(out, want) {
			t.Errorf("bench output lacks %q:\n%s", want, out)
		}
	}
	html, err := os.ReadFile(filepath.Join(dir, "report", "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(html), "<svg"); n < 4 {
		t.Errorf("report has %d charts, want at least 4", n)
	}
	again := filepath.Join(dir, "again")
	out, errOut, code = run(t, "report", "--db", db, "--report-dir", again)
	if code != 0 || !strings.Contains(out, "== colocation") {
		t.Fatalf("corepin report: exit %d: %s %s", code, out, errOut)
	}
	rebuilt, err := os.ReadFile(filepath.Join(again, "index.html"))
	if err != nil {
		t.Fatalf("corepin report wrote no index.html: %v", err)
	}
	// The regenerated report analyses the recorded parameters (the tiny
	// spec above, not the quick defaults) and equals the run's own.
	if string(rebuilt) != string(html) {
		t.Errorf("corepin report's index.html differs from the one corepin bench wrote")
	}
	if groups := corepinGroups(t, 0); len(groups) > 0 {
		t.Errorf("groups left behind: %v", groups)
	}
}
