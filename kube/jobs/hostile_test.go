package jobs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/corepin/corepin/bench"
	"github.com/corepin/corepin/bench/render"
	"github.com/corepin/corepin/store"
)

// The hostile corpus is dated around collectedAt: the pods were created at
// podCreated and their jobs ran a minute later for 2.5 s.
var (
	podCreated  = time.Date(2026, 11, 23, 1, 0, 0, 0, time.UTC)
	collectedAt = podCreated.Add(time.Hour)
)

// goodDoc is the result document of a real pod of the quick concurrency
// sweep (2 pods of 2 CPUs each, pinned), with its figures in range.
func goodDoc(t *testing.T, index int, pod string, wall float64) map[string]any {
	t.Helper()
	s, _ := plan(t, Options{Experiments: catalog, Sweep: "concurrency", Spec: []byte("concurrency:\n  cpus: [2]\n  concurrency: [1, 2]\n  modes: [pinned]\n"),
		Quick: true, Node: node16(), Repeats: 1, Image: "i"})
	j := s.Jobs[index]
	pj, err := json.Marshal(j.Point)
	if err != nil {
		t.Fatal(err)
	}
	started := podCreated.Add(time.Minute)
	run := fmt.Sprintf(`{"job":0,"cmd":"corepin workload spin --seconds 2 --threads 2","mode":"unbounded","qos":"LS","cpus":2,"threads":2,"cpuset":"2-3",
		"wall_s":%g,"user_s":4.9,"sys_s":0.02,"max_rss_kb":9000,"cpus_used":"2-3","migrations":3,"ctx_switches":120,"run_delay_s":0.01,
		"throttled_periods":0,"throttled_s":0,"nr_periods":0,"exit_code":0,"ops":500000,"ops_per_s":200000,"psi_some_s":0.1,"psi_scope":"system",
		"started_at":%q,"finished_at":%q}`, wall, started.Format(time.RFC3339Nano), started.Add(time.Duration(wall*float64(time.Second))).Format(time.RFC3339Nano))
	doc, err := Document(Marker{Sweep: s.Name, Index: j.Index, Repeat: j.Repeat, Point: pj, Pods: j.Pods, Quick: s.Quick, Repeats: s.Repeats,
		Topology: s.TopologySummary, Spec: s.Spec, Pod: pod, Result: json.RawMessage(run)})
	if err != nil {
		t.Fatal(err)
	}
	return decodeDoc(t, doc)
}

func decodeDoc(t *testing.T, doc []byte) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber() // 1e308 stays 1e308
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("decoding %s: %v", doc, err)
	}
	// The point's coordinates keep their order (a map would sort them).
	var p struct{ Point json.RawMessage }
	if err := json.Unmarshal(doc, &p); err != nil {
		t.Fatal(err)
	}
	if p.Point != nil {
		m["point"] = p.Point
	}
	return m
}

// set returns a copy of doc with the value at path ("result.wall_s") set
// to v (a json.Number for a number as written, json.RawMessage for raw
// JSON); a nil v deletes it.
func set(t *testing.T, doc map[string]any, path string, v any) []byte {
	t.Helper()
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	c := decodeDoc(t, b)
	m := c
	keys := strings.Split(path, ".")
	for _, k := range keys[:len(keys)-1] {
		m = m[k].(map[string]any)
	}
	if v == nil {
		delete(m, keys[len(keys)-1])
	} else {
		m[keys[len(keys)-1]] = v
	}
	out, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// hostile is one forged or corrupt result and a piece of the reason it
// must be refused with.
type hostile struct {
	name, reason string
	doc          []byte
}

// hostileCorpus is the field report's kind of documents (issue 17 §5:
// negative and 1e308 figures, dates from year 1 to 9999, arbitrary extra)
// and more: every figure, date, string and the marker's own fields out of
// what a pod can write.
func hostileCorpus(t *testing.T) []hostile {
	t.Helper()
	good := goodDoc(t, 1, "corepin-concurrency-001-r0-evil", 2.5)
	n := func(s string) json.Number { return json.Number(s) }
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	var hs []hostile
	add := func(name, path string, v any, reason string) {
		hs = append(hs, hostile{name: name, reason: reason, doc: set(t, good, path, v)})
	}
	for _, f := range []string{"wall_s", "user_s", "sys_s", "cpus", "run_delay_s", "throttled_s", "ops_per_s", "fps", "psi_some_s", "psi_full_s", "frames_per_s"} {
		add(f+" negative", "result."+f, n("-1"), f+" -1 outside")
		add(f+" 1e308", "result."+f, n("1e308"), f+" 1e+308 outside")
	}
	for _, f := range []string{"threads", "max_rss_kb", "migrations", "ctx_switches", "throttled_periods", "nr_periods", "frames", "ops", "job"} {
		add(f+" negative", "result."+f, n("-5"), f+" -5 outside")
		add(f+" 1e308", "result."+f, n("1e308"), "cannot unmarshal number 1e308")
	}
	add("max_rss_kb near int64", "result.max_rss_kb", n("9223372036854775807"), "max_rss_kb 9.223372036854776e+18 outside")
	add("exit code 1000", "result.exit_code", n("1000"), "exit code 1000")
	add("exit code -9", "result.exit_code", n("-9"), "exit code -9")
	add("wall 10 years", "result.wall_s", n("315360000"), "wall_s 3.1536e+08 outside")
	add("ops in no time", "result.wall_s", n("1e-300"), "over 1e+10 a second")
	add("user time beyond every CPU", "result.user_s", n("1e9"), "user_s 1e+09 outside")
	for _, d := range []string{"0001-01-01T00:00:01Z", "1970-01-01T00:00:00Z", "2020-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "2026-11-23T00:30:00Z", "2026-11-23T03:00:00Z"} {
		add("started_at "+d, "result.started_at", d, "started_at "+d+" outside")
		add("finished_at "+d, "result.finished_at", d, "finished_at "+d+" outside")
	}
	add("finished before started", "result.finished_at", "2026-11-23T01:00:30Z", "started_at to finished_at is -30.000 s")
	add("span longer than the wall", "result.finished_at", "2026-11-23T01:05:00Z", "started_at to finished_at is 240.000 s, wall_s 2.5")
	add("extra with 100 keys", "result.extra", raw(`{`+strings.TrimSuffix(strings.Repeat(`"k":1,`, 1), ",")+func() string {
		var b strings.Builder
		for i := range 100 {
			fmt.Fprintf(&b, `,"k%d":%d`, i, i)
		}
		return b.String()
	}()+`}`), "extra has 101 keys")
	add("extra key with spaces", "result.extra", raw(`{"a key":1}`), `extra key "a key"`)
	add("extra key with markup", "result.extra", raw(`{"<b>x</b>":1}`), "extra key")
	add("extra key of 200 bytes", "result.extra", raw(`{"`+strings.Repeat("k", 200)+`":1}`), "extra key")
	add("extra key unicode", "result.extra", raw(`{"ключ":1}`), "extra key")
	add("extra value 1e308", "result.extra", raw(`{"x":1e308}`), "extra.x 1e308 outside")
	add("extra value -1e300", "result.extra", raw(`{"x":-1e300}`), "extra.x -1e300 outside")
	add("extra nested deep", "result.extra", raw(`{"a":{"b":{"c":{"d":{"e":1}}}}}`), "nested deeper")
	add("extra an array", "result.extra", raw(`[1,2,3]`), "extra is not an object")
	add("extra a string", "result.extra", raw(`"hello"`), "extra is not an object")
	add("extra array of 100", "result.extra", raw(`{"a":[`+strings.TrimSuffix(strings.Repeat("1,", 100), ",")+`]}`), "extra.a has 100 items")
	add("extra string with escape", "result.extra", raw(`{"a":"\u001b[2J"}`), "extra.a holds control character")
	add("mode evil", "result.mode", "evil", `mode "evil"`)
	add("mode empty", "result.mode", "", `mode ""`)
	add("qos ROOT", "result.qos", "ROOT", `qos "ROOT"`)
	add("psi scope", "result.psi_scope", "everywhere", `psi_scope "everywhere"`)
	add("cmd with escape", "result.cmd", "spin\x1b[2J", "cmd holds control character")
	add("cmd with newline", "result.cmd", "spin\nFAKE ROW", "cmd holds control character")
	add("signal of 100 bytes", "result.signal", strings.Repeat("S", 100), "signal of 100 bytes")
	add("cpuset beyond a node", "result.cpuset", "0-60000", "cpuset")
	add("cpuset not a list", "result.cpuset", "banana", "cpuset")
	add("cpus_used backwards", "result.cpus_used", "3-1", "cpus_used")
	add("cpus_used not canonical", "result.cpus_used", "2,3", "cpus_used")
	add("leftover pid 0", "result.leftovers", raw(`[{"pid":0,"comm":"x"}]`), "leftover process 0")
	add("leftover long comm", "result.leftovers", raw(`[{"pid":5,"comm":"`+strings.Repeat("c", 100)+`"}]`), "leftover process 5")
	add("topology with a newline", "topology", "16 CPUs\n<script>", "topology holds control character")
	add("topology of 300 bytes", "topology", strings.Repeat("t", 300), "topology of 300 bytes")
	add("pod name not a name", "pod", "Evil Pod!", "not a Kubernetes pod name")
	add("point with extra coordinate", "point", raw(`{"cpus":"2","mode":"pinned","concurrency":"2","x":"1"}`), "coordinates")
	add("point with 100 coordinates", "point", raw(`{`+func() string {
		var b []string
		for i := range 100 {
			b = append(b, fmt.Sprintf(`"c%d":"%d"`, i, i))
		}
		return strings.Join(b, ",")
	}()+`}`), "coordinates")
	add("point value a path", "point", raw(`{"cpus":"2","mode":"../../etc","concurrency":"2"}`), "point coordinate mode")
	add("point value long", "point", raw(`{"cpus":"2","mode":"`+strings.Repeat("p", 100)+`","concurrency":"2"}`), "point coordinate mode")
	add("point cpus negative", "point", raw(`{"cpus":"-2","mode":"pinned","concurrency":"2"}`), "point coordinate cpus")
	add("point cpus 1e300", "point", raw(`{"cpus":"1e300","mode":"pinned","concurrency":"2"}`), "point coordinate cpus")
	add("point concurrency not the pods", "point", raw(`{"cpus":"2","mode":"pinned","concurrency":"4"}`), "runs 4 pods, the result says 2")
	add("point mode unknown", "point", raw(`{"cpus":"2","mode":"evil","concurrency":"2"}`), "is not one kube jobs writes")
	add("spec unknown field", "spec", raw(`{"bogus":1}`), "spec:")
	add("spec an array", "spec", raw(`[1]`), "is not an object")
	add("spec of 3000 bytes", "spec", raw(`{"job":{"workload":"`+strings.Repeat("w", 3000)+`"}}`), "spec of")
	add("repeats 0", "repeats", n("0"), "repeat 0 of 0 repeats")
	add("repeat beyond repeats", "repeat", n("5"), "repeat 5 of 1 repeats")
	add("index beyond the bounds", "index", n("1e9"), "cannot unmarshal")
	add("pods 0", "pods", n("0"), "outside the bounds")
	add("unknown sweep", "sweep", "colocation", "unknown sweep")
	nan := bytes.Replace(set(t, good, "result.wall_s", n("12345")), []byte("12345"), []byte("NaN"), 1)
	hs = append(hs, hostile{name: "wall NaN", reason: "invalid character 'N'", doc: nan})
	return hs
}

// TestCollectRefusesHostileDocuments collects the hostile corpus with
// good documents among it, as a termination message each and as log
// lines: every hostile one is refused with its reason and counted, the
// good ones are kept, and what is recorded reports without NaN, Inf or a
// run longer than the pods lived.
func TestCollectRefusesHostileDocuments(t *testing.T) {
	corpus := hostileCorpus(t)
	if len(corpus) < 50 {
		t.Fatalf("hostile corpus of %d documents, want at least 50", len(corpus))
	}
	now := func() time.Time { return collectedAt }
	for _, h := range corpus {
		c := Collection{Experiments: catalog}
		c.Now = now
		err := c.addDocument("evil", h.doc, podCreated)
		if err == nil || !strings.Contains(err.Error(), h.reason) || c.Results() != 0 {
			t.Errorf("%s: addDocument(%.300s) = %v, %d results; want it refused with %q", h.name, h.doc, err, c.Results(), h.reason)
		}
		implausibleWant := !strings.Contains(h.reason, "cannot unmarshal") && !strings.Contains(h.reason, "invalid character") &&
			h.reason != "" && !strings.Contains(h.reason, "unknown sweep") && !strings.Contains(h.reason, "outside the bounds")
		if implausibleWant && !errors.Is(err, ErrImplausible) {
			t.Errorf("%s: error %v does not wrap ErrImplausible", h.name, err)
		}
	}
	// Everything in one collection, from termination messages and from
	// log lines: only the good results are recorded.
	docs, logs := Collection{Experiments: catalog}, Collection{Experiments: catalog}
	docs.Now, logs.Now = now, now
	var stream bytes.Buffer
	goods := [][]byte{}
	for i, wall := range []float64{2.5, 3.5} {
		b, err := json.Marshal(goodDoc(t, 1, fmt.Sprintf("corepin-concurrency-001-r0-good%d", i), wall))
		if err != nil {
			t.Fatal(err)
		}
		goods = append(goods, b)
	}
	all := append([]hostile{{name: "good", doc: goods[0]}}, corpus...)
	all = append(all, hostile{name: "good", doc: goods[1]})
	for i, h := range all {
		_ = docs.addDocument(fmt.Sprintf("pod-%d", i), h.doc, podCreated)
		fmt.Fprintf(&stream, "[pod/pod-%d] %s%s\n", i, MarkerPrefix, h.doc)
	}
	logs.add("all", &stream, podCreated)
	for _, c := range []*Collection{&docs, &logs} {
		if c.Results() != 2 {
			t.Fatalf("kept %d results, want the 2 good ones", c.Results())
		}
	}
	if got := logs.Implausible(); got < 50 || got > len(corpus) || len(logs.Skipped) != len(corpus) {
		t.Errorf("log collection: %d skipped, %d implausible; want %d skipped, at least 50 implausible", len(logs.Skipped), got, len(corpus))
	}
	for _, s := range logs.Skipped {
		if s.Reason == "" {
			t.Errorf("skipped %+v without a reason", s)
		}
	}
	db, runID := recordOne(t, &docs)
	jobs, err := db.Jobs(runID)
	if err != nil || len(jobs) != 2 {
		t.Fatalf("Jobs() = %d, %v; want the 2 good jobs", len(jobs), err)
	}
	for _, j := range jobs {
		if j.WallS != 2.5 && j.WallS != 3.5 || len(j.Extra) > 0 && !bytes.Contains(j.Extra, []byte("psi_some_s")) {
			t.Errorf("recorded job %+v, want a good one", j)
		}
	}
	text := rebuiltText(t, db, runID)
	for _, bad := range []string{"NaN", "Inf"} {
		if strings.Contains(text, bad) {
			t.Errorf("report holds %s:\n%s", bad, text)
		}
	}
	if !strings.Contains(text, "(4 s)") && !strings.Contains(text, "(3 s)") {
		t.Errorf("report does not give the run's 3.5 s span (2 good jobs):\n%s", text)
	}
}

// rebuilt is the bench report of run id (a bench run), rebuilt from db
// as `corepin report --run` does.
func rebuilt(t *testing.T, db *store.DB, id int64) bench.Report {
	t.Helper()
	runs, err := db.Runs(store.RunFilter{ID: id, Command: "bench"})
	if err != nil || len(runs) != 1 {
		t.Fatalf("Runs() = %v, %v", runs, err)
	}
	ms, err := db.Measurements(id, "")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := bench.Rebuild(runs[0], ms, &bench.Env{})
	if err != nil {
		t.Fatalf("Rebuild() error = %v", err)
	}
	return rep
}

// rebuiltText is the text report of run id.
func rebuiltText(t *testing.T, db *store.DB, id int64) string {
	t.Helper()
	var b strings.Builder
	if err := render.WriteText(&b, rebuilt(t, db, id)); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// FuzzParseDocument feeds arbitrary documents, and the good document with
// one figure replaced by an arbitrary number or string, to the parser:
// nothing panics, a document is kept or refused with a reason, and a kept
// one holds only finite, non-negative figures dated within the pod's
// life, so recording and reporting it gives no NaN or Inf.
func FuzzParseDocument(f *testing.F) {
	f.Add([]byte(`{"v":1,"sweep":"threads","index":0,"repeat":0,"point":{"cpus":"4","threads":"4"},"pods":1,"quick":true,"repeats":1,"topology":"x","spec":{},"pod":"p","result":{"job":0,"mode":"unbounded","wall_s":1,"ops":5}}`), "wall_s", 1.0, "")
	f.Add([]byte(""), "wall_s", 1e308, "")
	f.Add([]byte(""), "started_at", 0.0, "9999-12-31T23:59:59Z")
	f.Add([]byte(""), "extra", 0.0, `{"a":1e308}`)
	f.Add([]byte(""), "ops", -1.0, "")
	f.Fuzz(func(t *testing.T, doc []byte, field string, num float64, str string) {
		if len(doc) == 0 {
			if strings.Contains(field, ".") {
				return // set would read it as a path below result
			}
			// The good document, one of its result's fields replaced.
			good := goodDoc(t, 0, "corepin-concurrency-000-r0-fuzz", 2)
			var v any = str
			if str == "" {
				if math.IsNaN(num) || math.IsInf(num, 0) {
					return // JSON has no such number
				}
				v = json.Number(fmt.Sprint(num))
			} else if json.Valid([]byte(str)) {
				v = json.RawMessage(str)
			}
			doc = set(t, good, "result."+field, v)
		}
		c := Collection{Experiments: catalog}
		c.Now = func() time.Time { return collectedAt }
		err := c.addDocument("fuzz", doc, podCreated)
		if (err == nil) != (c.Results() == 1) || err != nil && err.Error() == "" {
			t.Fatalf("addDocument(%q) = %v with %d results", doc, err, c.Results())
		}
		if err != nil {
			return
		}
		j := c.results[0].job
		w := windowOf(podCreated, collectedAt)
		for _, v := range []float64{j.WallS, j.UserS, j.SysS, j.CPUs, j.RunDelayS, j.ThrottledS, j.FPS, j.OpsPerSec, float64(j.Ops), float64(j.Frames)} {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				t.Fatalf("kept %q with a figure %v", doc, v)
			}
		}
		for _, d := range []time.Time{j.StartedAt, j.FinishedAt} {
			if !d.IsZero() && (d.Before(w.from) || d.After(w.to)) {
				t.Fatalf("kept %q dated %v, outside %v-%v", doc, d, w.from, w.to)
			}
		}
		db, err := store.Open(t.TempDir() + "/r.db")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		ids, err := c.Record(db, "fuzz")
		if err != nil || len(ids) != 1 {
			t.Fatalf("Record(a kept result) = %v, %v", ids, err)
		}
		if text := rebuiltText(t, db, ids[0]); strings.Contains(text, "NaN") || strings.Contains(text, "Inf") {
			t.Fatalf("report of %q holds NaN or Inf:\n%s", doc, text)
		}
	})
}
