package jobs

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/corepin/corepin/experiment"
	"github.com/corepin/corepin/runner"
	"github.com/corepin/corepin/store"
)

// Bounds on what Collect reads.
const (
	// MaxLogBytes bounds one log; a longer one is skipped.
	MaxLogBytes = 64 << 20
	// MaxLineBytes bounds one log line; a log with a longer line is skipped.
	MaxLineBytes = 4 << 20
	// MaxResults bounds the results of one collection.
	MaxResults = 1 << 20
)

// Skipped is a log, or a result in it, that Collect could not use.
type Skipped struct {
	Log    string `json:"log"`
	Reason string `json:"reason"`
	// Implausible is set when the result was refused for holding what no
	// corepin kube jobs pod can produce (ErrImplausible).
	Implausible bool `json:"implausible,omitempty"`
}

// result is one pod's result.
type result struct {
	m   Marker
	job runner.JobResult
	log string
}

// Collection is what Collect found in a set of logs.
type Collection struct {
	// Experiments are the experiments whose results are kept
	// (bench.Clusters); a result of another is skipped.
	Experiments experiment.Catalog `json:"-"`
	results     []result
	Skipped     []Skipped `json:"skipped"`
	// Warnings are facts about points, not about one log: a point with
	// fewer results than pods, a failed job left out of the metrics.
	Warnings []string `json:"warnings,omitempty"`
	// Now is the collection's clock (time.Now when nil): no result may
	// be dated after Now plus ClockSlack.
	Now func() time.Time `json:"-"`
}

// Results is the number of results collected.
func (c *Collection) Results() int { return len(c.results) }

// Implausible is the number of skipped logs or results refused for
// holding what no pod can produce (see ErrImplausible).
func (c *Collection) Implausible() int {
	n := 0
	for _, s := range c.Skipped {
		if s.Implausible {
			n++
		}
	}
	return n
}

// skip records a log or result that is not used.
func (c *Collection) skip(log string, err error) {
	c.Skipped = append(c.Skipped, Skipped{Log: log, Reason: err.Error(), Implausible: errors.Is(err, ErrImplausible)})
}

// window is when the results of a pod created at created (zero: unknown)
// may be dated.
func (c *Collection) window(created time.Time) window {
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	return windowOf(created, now())
}

// Add reads one pod's log (or several pods' logs in one stream, as
// `kubectl logs -l ... --prefix` gives them) and keeps every marked result
// in it. Problems are recorded in c.Skipped, never returned: a bad log
// must not stop a collection.
func (c *Collection) Add(name string, r io.Reader) {
	c.add(name, r, time.Time{})
}

// add is Add for the log of a pod created at created (zero: unknown).
func (c *Collection) add(name string, r io.Reader, created time.Time) {
	w := c.window(created)
	sc := bufio.NewScanner(io.LimitReader(r, MaxLogBytes+1))
	sc.Buffer(make([]byte, 0, 64<<10), MaxLineBytes)
	var read int64
	found := 0
	for sc.Scan() {
		line := sc.Bytes()
		read += int64(len(line)) + 1
		i := bytes.Index(line, []byte(MarkerPrefix+"{"))
		if i < 0 {
			continue
		}
		found++
		res, err := c.parseMarker(line[i+len(MarkerPrefix):], w)
		if err != nil {
			c.skip(name, err)
			continue
		}
		if len(c.results) >= MaxResults {
			c.Skipped = append(c.Skipped, Skipped{Log: name, Reason: fmt.Sprintf("more than %d results in one collection", MaxResults)})
			return
		}
		res.log = name
		c.results = append(c.results, res)
	}
	switch err := sc.Err(); {
	case errors.Is(err, bufio.ErrTooLong):
		c.Skipped = append(c.Skipped, Skipped{Log: name, Reason: fmt.Sprintf("a line longer than %d bytes", MaxLineBytes)})
	case err != nil:
		c.Skipped = append(c.Skipped, Skipped{Log: name, Reason: fmt.Sprintf("reading: %v", err)})
	case read > MaxLogBytes:
		c.Skipped = append(c.Skipped, Skipped{Log: name, Reason: fmt.Sprintf("longer than %d bytes; the rest was not read", MaxLogBytes)})
	case found == 0:
		c.Skipped = append(c.Skipped, Skipped{Log: name, Reason: "no " + strings.TrimSpace(MarkerPrefix) + " line: not a corepin kube jobs pod, or it did not finish"})
	}
}

// AddDocument keeps the result document doc of one pod (its termination
// message, see Document) under name. A doc that is not a usable result
// (empty, longer than MaxMessageBytes, not a result document, a result
// of a failed run, an implausible one: ErrImplausible) is returned as an
// error and nothing is kept or skipped, so the caller can read the pod's
// log instead.
func (c *Collection) AddDocument(name string, doc []byte) error {
	return c.addDocument(name, doc, time.Time{})
}

// addDocument is AddDocument for a pod created at created (zero: unknown).
func (c *Collection) addDocument(name string, doc []byte, created time.Time) error {
	if len(doc) == 0 {
		return errors.New("no result document")
	}
	if len(doc) > MaxMessageBytes {
		return fmt.Errorf("result document of %d bytes, more than the %d Kubernetes keeps", len(doc), MaxMessageBytes)
	}
	res, err := c.parseMarker(bytes.TrimSpace(doc), c.window(created))
	if err != nil {
		return err
	}
	if res.m.V != ResultVersion {
		return fmt.Errorf("a result without version %d is a log line, not a result document", ResultVersion)
	}
	if len(c.results) >= MaxResults {
		return fmt.Errorf("more than %d results in one collection", MaxResults)
	}
	res.log = name
	c.results = append(c.results, res)
	return nil
}

// parseMarker reads a marker line or result document and checks it holds
// what a pod of one of c.Experiments can produce, dated within w.
func (c *Collection) parseMarker(b []byte, w window) (result, error) {
	var r result
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r.m); err != nil {
		return r, fmt.Errorf("parsing the result line: %w", err)
	}
	if dec.More() {
		return r, errors.New("parsing the result line: trailing data after the JSON object")
	}
	m := r.m
	switch {
	case m.V != 0 && m.V != ResultVersion:
		return r, fmt.Errorf("result version %d: this corepin reads version %d; collect with the corepin that generated the Jobs", m.V, ResultVersion)
	case c.Experiments.Index(m.Sweep) < 0:
		return r, fmt.Errorf("result of unknown sweep %q", m.Sweep)
	case m.Index < 0 || m.Index > MaxJobs || m.Repeat < 0 || m.Repeat >= MaxRepeats || m.Pods < 1 || m.Pods > maxPods:
		return r, fmt.Errorf("result with index %d, repeat %d, pods %d outside the bounds kube jobs writes", m.Index, m.Repeat, m.Pods)
	case len(m.Result) == 0 || string(m.Result) == "null":
		return r, fmt.Errorf("pod %s printed no corepin run result (did corepin run fail? see the rest of its log)", m.Pod)
	}
	if _, err := experiment.ParsePoint(m.Point); err != nil {
		return r, err
	}
	if err := json.Unmarshal(m.Result, &r.job); err != nil {
		return r, fmt.Errorf("parsing the corepin run result of pod %s: %w", m.Pod, err)
	}
	exp, err := c.Experiments.Lookup(m.Sweep)
	if err != nil {
		return r, err
	}
	if err := checkMarker(m, exp); err != nil {
		return r, err
	}
	if err := checkJob(r.job, w); err != nil {
		return r, fmt.Errorf("pod %.64s: %w", m.Pod, err)
	}
	return r, nil
}

// group is the results of one point x repeat.
type group struct {
	sweep         string
	index, repeat int
	point         json.RawMessage
	pods          int
	jobs          []runner.JobResult
}

// Record stores the collection as one bench run per sweep (command
// "bench", the sweep's spec as its parameters), with every pod's job and,
// per point and repeat, the metrics the experiment's analysis reads, so
// `corepin report --run ID` and `corepin results` read it like a local run.
// It returns the run ids.
func (c *Collection) Record(db *store.DB, version string) ([]int64, error) {
	bySweep := map[string][]result{}
	var sweeps []string
	for _, r := range c.results {
		if _, ok := bySweep[r.m.Sweep]; !ok {
			sweeps = append(sweeps, r.m.Sweep)
		}
		bySweep[r.m.Sweep] = append(bySweep[r.m.Sweep], r)
	}
	slices.SortFunc(sweeps, func(a, b string) int { return cmp.Compare(c.Experiments.Index(a), c.Experiments.Index(b)) })
	var ids []int64
	for _, s := range sweeps {
		id, err := c.record(db, version, bySweep[s])
		if err != nil {
			return ids, err
		}
		ids = append(ids, id)
	}
	return ids, nil
}

func (c *Collection) record(db *store.DB, version string, rs []result) (int64, error) {
	ref := rs[0].m
	groups := map[[2]int]*group{}
	var keys [][2]int
	seen := map[string]bool{}
	for _, r := range rs {
		m := r.m
		if m.Quick != ref.Quick || m.Repeats != ref.Repeats || m.Topology != ref.Topology || !bytes.Equal(m.Spec, ref.Spec) {
			c.Skipped = append(c.Skipped, Skipped{Log: r.log, Reason: fmt.Sprintf("pod %s belongs to another generation of the %s sweep (spec, repeats or node type differ from pod %s)", m.Pod, m.Sweep, ref.Pod)})
			continue
		}
		id := fmt.Sprintf("%d/%d/%s/%d", m.Index, m.Repeat, m.Pod, r.job.Job)
		if seen[id] {
			c.Skipped = append(c.Skipped, Skipped{Log: r.log, Reason: fmt.Sprintf("pod %s: a second result for index %d repeat %d", m.Pod, m.Index, m.Repeat)})
			continue
		}
		seen[id] = true
		k := [2]int{m.Index, m.Repeat}
		g := groups[k]
		if g == nil {
			g = &group{sweep: m.Sweep, index: m.Index, repeat: m.Repeat, point: m.Point, pods: m.Pods}
			groups[k] = g
			keys = append(keys, k)
		}
		g.jobs = append(g.jobs, r.job)
	}
	slices.SortFunc(keys, func(a, b [2]int) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) })
	params := experiment.Params{Quick: ref.Quick, Repeats: ref.Repeats, Driver: "kubernetes",
		Experiments: []experiment.ExperimentParams{{Name: ref.Sweep, Spec: ref.Spec}}}
	exp, err := c.Experiments.Lookup(ref.Sweep)
	if err != nil {
		return 0, err
	}
	if _, err := params.Apply(exp); err != nil {
		return 0, err
	}
	pj, err := json.Marshal(params)
	if err != nil {
		return 0, fmt.Errorf("recording parameters: %w", err)
	}
	id, err := db.BeginRun(store.Run{Command: "bench", Params: pj, CorepinVersion: version, Hostname: "kubernetes",
		TopologySummary: ref.Topology + " (each node)"})
	if err != nil {
		return 0, err
	}
	var points []experiment.PointResult
	elapsed := 0.0
	var first, last time.Time
	n := 0
	index := map[int]int{} // point index -> place in rep.Points
	for _, k := range keys {
		g := groups[k]
		for _, j := range g.jobs {
			row := j.Row()
			row.Job = n
			n++
			if err := db.AddJob(id, row); err != nil {
				return id, err
			}
			if !j.StartedAt.IsZero() && (first.IsZero() || j.StartedAt.Before(first)) {
				first = j.StartedAt
			}
			if j.FinishedAt.After(last) {
				last = j.FinishedAt
			}
		}
		p, err := experiment.ParsePoint(g.point)
		if err != nil {
			return id, err
		}
		pi, ok := index[g.index]
		if !ok {
			pi = len(points)
			index[g.index] = pi
			points = append(points, experiment.PointResult{Point: p})
		}
		ok2 := okJobs(g.jobs)
		if len(g.jobs) < g.pods {
			c.Warnings = append(c.Warnings, fmt.Sprintf("%s point %d repeat %d: %d of %d pods reported", g.sweep, g.index, g.repeat, len(g.jobs), g.pods))
		}
		if len(ok2) < len(g.jobs) {
			c.Warnings = append(c.Warnings, fmt.Sprintf("%s point %d repeat %d: %d failed jobs left out of the metrics", g.sweep, g.index, g.repeat, len(g.jobs)-len(ok2)))
		}
		if len(ok2) == 0 {
			points[pi].Errors = append(points[pi].Errors, "no pod succeeded")
			continue
		}
		ms, err := experiment.Measurements(g.sweep, p, g.repeat, exp.Metrics(p, ok2))
		if err != nil {
			return id, err
		}
		if err := db.AddMeasurement(id, ms...); err != nil {
			return id, err
		}
	}
	if !first.IsZero() && last.After(first) {
		elapsed = last.Sub(first).Seconds()
	}
	ems, err := experiment.ExperimentMeasurements(ref.Sweep, elapsed, points)
	if err != nil {
		return id, err
	}
	if err := db.AddMeasurement(id, ems...); err != nil {
		return id, err
	}
	return id, db.FinishRun(id, time.Now())
}

func okJobs(js []runner.JobResult) []runner.JobResult {
	var out []runner.JobResult
	for _, j := range js {
		if j.ExitCode == 0 && j.Error == "" && j.Signal == "" && j.WallS > 0 {
			out = append(out, j)
		}
	}
	return out
}
