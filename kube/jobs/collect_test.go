package jobs

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/corepin/corepin/store"
)

// TestCollectRoundTrip runs the generated container scripts (with a fake
// corepin that prints what `corepin run -o json` prints), collects their
// logs into a results database and rebuilds the bench report from it, as
// `corepin report` does.
func TestCollectRoundTrip(t *testing.T) {
	spec := []byte("concurrency:\n  cpus: [2]\n  concurrency: [1, 2]\n  modes: [pinned]\n")
	s, objs := plan(t, Options{Experiments: catalog, Sweep: "concurrency", Spec: spec, Quick: true, Node: node16(), Repeats: 1, Image: "i"})
	if len(objs) != 2 {
		t.Fatalf("%d Jobs, want 2 (concurrency 1 and 2)", len(objs))
	}
	script := func(i int) string { return objs[i].Spec.Template.Spec.Containers[0].Command[2] }
	run := func(wall string) string {
		return `{"job":0,"cmd":"corepin workload spin","mode":"unbounded","cpus":2,"cpuset":"0-1","wall_s":` + wall +
			`,"user_s":1,"sys_s":0,"cpus_used":"0-1","migrations":4,"throttled_s":0,"exit_code":0,"ops":1000,"ops_per_s":500,"started_at":"2026-11-23T01:00:00Z","finished_at":"2026-11-23T01:00:0` + wall + `Z"}`
	}
	type pod struct {
		name, out    string
		script, code int
	}
	pods := []pod{
		{name: "corepin-concurrency-000-r0-aaaaa", script: 0, out: run("2")},
		{name: "corepin-concurrency-001-r0-bbbbb", script: 1, out: run("3")},
		{name: "corepin-concurrency-001-r0-ccccc", script: 1, out: run("5")},
		// A failed run prints no result: its document and its marker say
		// so, it is skipped with that reason, and the script keeps the
		// run's exit status.
		{name: "corepin-concurrency-001-r0-ddddd", script: 1, out: "", code: 3},
	}
	// c reads the termination messages (the log where there is none), as
	// collect does through the API; fromLogs reads only the logs.
	c, fromLogs := Collection{Experiments: catalog}, Collection{Experiments: catalog}
	for _, p := range pods {
		log, msg := runScript(t, script(p.script), p.name, p.out, p.code)
		fromLogs.Add(p.name, bytes.NewReader(log))
		if err := c.AddDocument(p.name, msg); err != nil {
			if p.code == 0 {
				t.Errorf("pod %s: AddDocument(%q) error = %v, want its result", p.name, msg, err)
			}
			c.Add(p.name, bytes.NewReader(log))
		} else if p.code != 0 {
			t.Errorf("pod %s: AddDocument(%q) kept the result of a run that printed none", p.name, msg)
		}
	}
	for _, c := range []*Collection{&c, &fromLogs} {
		if c.Results() != 3 {
			t.Fatalf("Results() = %d, want 3 (skipped: %+v)", c.Results(), c.Skipped)
		}
		if len(c.Skipped) != 1 || c.Skipped[0].Log != "corepin-concurrency-001-r0-ddddd" || !strings.Contains(c.Skipped[0].Reason, "printed no corepin run result") {
			t.Errorf("Skipped = %+v, want pod ddddd: printed no corepin run result", c.Skipped)
		}
	}
	type kept struct {
		M   Marker
		Row store.Job
	}
	project := func(c *Collection) (out []kept) {
		for _, r := range c.results {
			out = append(out, kept{r.m, r.job.Row()})
		}
		return out
	}
	if diff := cmp.Diff(project(&fromLogs), project(&c), cmpopts.IgnoreFields(Marker{}, "Result")); diff != "" {
		t.Errorf("results from documents differ from those from logs (-logs +documents):\n%s", diff)
	}
	db, runID := recordOne(t, &c)
	jobs, err := db.Jobs(runID)
	if err != nil || len(jobs) != 3 {
		t.Fatalf("Jobs() = %d jobs, %v; want 3", len(jobs), err)
	}
	rep := rebuilt(t, db, runID)
	if len(rep.Experiments) != 1 || rep.Experiments[0].Name != "concurrency" {
		t.Fatalf("rebuilt experiments %+v, want concurrency", rep.Experiments)
	}
	type pt struct {
		Label string
		Wall  float64
		Max   float64
	}
	var got []pt
	for _, p := range rep.Experiments[0].Points {
		got = append(got, pt{p.Point.Label(), p.Median("job_wall_s"), p.Median("job_wall_max_s")})
	}
	want := []pt{{"cpus=2 mode=pinned concurrency=1", 2, 2}, {"cpus=2 mode=pinned concurrency=2", 4, 5}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rebuilt points (-want +got):\n%s", diff)
	}
	if rep.Params.Driver != "kubernetes" || len(rep.Params.Experiments) != 1 || s.Name != "concurrency" {
		t.Errorf("params %+v, want driver kubernetes and the concurrency spec", rep.Params)
	}
	if len(c.Warnings) != 0 {
		t.Errorf("Warnings = %q, want none (point 1 has its 2 pods)", c.Warnings)
	}
}

func TestCollectSkipsBadLogs(t *testing.T) {
	good := `corepin-result {"sweep":"threads","index":0,"repeat":0,"point":{"cpus":"4","threads":"4"},"pods":1,"quick":true,"repeats":1,"topology":"x","spec":{},"pod":"p","result":{"job":0,"mode":"unbounded","wall_s":1}}`
	tests := []struct {
		name   string
		log    string
		reason string
	}{
		{name: "no marker", log: "hello\nworld\n", reason: "no corepin-result line"},
		{name: "not JSON", log: "corepin-result {oops\n", reason: "parsing the result line"},
		{name: "unknown key", log: strings.Replace(good, `"pod":"p"`, `"pod":"p","x":1`, 1), reason: "unknown field"},
		{name: "unknown sweep", log: strings.Replace(good, `"threads","index"`, `"colocation","index"`, 1), reason: "unknown sweep"},
		{name: "null result", log: strings.Replace(good, `{"job":0,"mode":"unbounded","wall_s":1}`, `null`, 1), reason: "printed no corepin run result"},
		{name: "negative wall", log: strings.Replace(good, `"wall_s":1`, `"wall_s":-1`, 1), reason: "wall_s -1 outside"},
		{name: "huge index", log: strings.Replace(good, `"index":0`, `"index":99999999`, 1), reason: "outside the bounds"},
		{name: "point not an object", log: strings.Replace(good, `{"cpus":"4","threads":"4"}`, `[1]`, 1), reason: "not an object"},
		{name: "trailing data", log: good + "{}", reason: "trailing data"},
		{name: "line too long", log: "corepin-result {" + strings.Repeat("x", MaxLineBytes+1), reason: "longer than"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := Collection{Experiments: catalog}
			c.Add("log", strings.NewReader(tc.log))
			if c.Results() != 0 || len(c.Skipped) != 1 || !strings.Contains(c.Skipped[0].Reason, tc.reason) {
				t.Errorf("results %d, skipped %+v; want 0 and one reason containing %q", c.Results(), c.Skipped, tc.reason)
			}
		})
	}
	t.Run("kubectl --prefix", func(t *testing.T) {
		c := Collection{Experiments: catalog}
		c.Add("all", strings.NewReader("[pod/p/job] noise\n[pod/p/job] "+good+"\n"))
		if c.Results() != 1 || len(c.Skipped) != 0 {
			t.Errorf("results %d, skipped %+v; want the prefixed result", c.Results(), c.Skipped)
		}
	})
}

// FuzzCollectAdd feeds arbitrary logs to Add and records what it keeps:
// nothing may panic, and every marked line is either a result or a reason.
func FuzzCollectAdd(f *testing.F) {
	f.Add([]byte(`corepin-result {"sweep":"threads","index":0,"repeat":0,"point":{"cpus":"4","threads":"4"},"pods":1,"quick":true,"repeats":1,"topology":"x","spec":{},"pod":"p","result":{"job":0,"mode":"unbounded","wall_s":1,"ops":5}}`))
	f.Add([]byte("noise\ncorepin-result {\"sweep\":\"throughput\"}\n"))
	f.Fuzz(func(t *testing.T, log []byte) {
		c := Collection{Experiments: catalog}
		c.Add("fuzz", bytes.NewReader(log))
		if c.Results() == 0 && len(c.Skipped) == 0 {
			t.Fatalf("no result and no reason for %q", log)
		}
		if c.Results() == 0 {
			return
		}
		db, err := store.Open(filepath.Join(t.TempDir(), "r.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := c.Record(db, "fuzz"); err != nil {
			t.Logf("Record: %v", err) // a refusal is fine; a panic is not
		}
	})
}

// recordOne records c in a fresh results database (closed when the test
// ends) and returns it with the one run recorded.
func recordOne(t *testing.T, c *Collection) (*store.DB, int64) {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "results.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ids, err := c.Record(db, "test")
	if err != nil || len(ids) != 1 {
		t.Fatalf("Record() = %v, %v; want one run", ids, err)
	}
	return db, ids[0]
}
