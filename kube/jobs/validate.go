package jobs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/experiment"
	"github.com/corepin/corepin/runner"
)

// ErrImplausible is wrapped by the reason a result is refused for holding
// what no pod of `corepin kube jobs` can produce: a negative or enormous
// figure, a date outside the sweep's life, an unknown mode, a string
// longer than corepin writes. Such a result is skipped (counted in
// Collection.Implausible), never recorded.
var ErrImplausible = errors.New("implausible result")

// Bounds of a plausible result. They are generous: a real pod is far
// inside each, and a result outside one is forged or corrupt.
const (
	// ClockSlack is how far a pod's clock may be from the collector's and
	// the API server's: a result's dates must fall within
	// [pod creation - ClockSlack, now + ClockSlack].
	ClockSlack = 10 * time.Minute
	// maxWallS bounds a job's wall time (a week; a sweep's jobs take
	// seconds to minutes).
	maxWallS = 7 * 24 * 3600
	// maxWallSkewS is how far wall_s may be from finished_at - started_at
	// (corepin run derives one from the other).
	maxWallSkewS = 1
	// maxNodeCPUs bounds a job's CPUs and a cpuset's size; CPU time is at
	// most wall time on every one of them.
	maxNodeCPUs = 8192
	maxThreads  = 1 << 16
	// maxRate bounds frames or ops per second (the spin kernel does about
	// 1e5 ops/s per CPU, an encoder a few thousand frames).
	maxRate = 1e10
	// maxCount bounds the counters (migrations, context switches,
	// periods).
	maxCount = 1e13
	// maxRSSKB is 1 PiB.
	maxRSSKB = 1 << 40
	// Strings: the command, error and signal are short; the tails are
	// corepin run's (proc.DefaultTail, plus its own notes).
	maxCmdBytes   = 4096
	maxErrorBytes = 4096
	maxTailBytes  = 16 << 10
	maxShortBytes = 64
	// maxTopologyBytes bounds the node type's summary; maxSpecBytes the
	// resolved spec (about 300 bytes).
	maxTopologyBytes = 256
	maxSpecBytes     = 2048
	// A point has a few short coordinates.
	maxPointKeys  = 8
	maxPointBytes = 32
	// maxLeftovers is proc's bound on the processes listed; a comm is at
	// most 15 bytes (TASK_COMM_LEN).
	maxLeftovers  = 64
	maxCommBytes  = 15
	maxPID        = 1 << 22
	maxExtraBytes = 4096
	maxExtraKeys  = 16
	maxExtraKey   = 32
	maxExtraDepth = 3
	maxExtraItems = 64
	maxExtraValue = 1e15
)

// minPlausible is the earliest date a result may carry when the pod's
// creation is unknown (saved logs): corepin did not exist before it.
var minPlausible = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// window is when a result's dates may fall.
type window struct {
	from, to time.Time
}

// windowOf is the window of a pod created at created (zero: unknown),
// collected at now.
func windowOf(created, now time.Time) window {
	w := window{from: minPlausible, to: now.Add(ClockSlack)}
	if !created.IsZero() && created.Add(-ClockSlack).After(w.from) {
		w.from = created.Add(-ClockSlack)
	}
	return w
}

// implausible wraps ErrImplausible with what is wrong.
func implausible(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrImplausible, fmt.Sprintf(format, args...))
}

// checkMarker checks the marker's own fields (the sweep, its place and
// the result already checked by parseMarker): the point is one of exp's,
// the sweep's experiment, the node type and spec are what kube jobs writes.
func checkMarker(m Marker, exp experiment.Cluster) error {
	if err := checkString("topology", m.Topology, maxTopologyBytes, false); err != nil {
		return err
	}
	if m.Pod != "" {
		if len(m.Pod) > validation.DNS1123SubdomainMaxLength || len(validation.IsDNS1123Subdomain(m.Pod)) > 0 {
			return implausible("pod name %.64q is not a Kubernetes pod name", m.Pod)
		}
	}
	if m.Repeats < 1 || m.Repeats > MaxRepeats || m.Repeat >= m.Repeats {
		return implausible("repeat %d of %d repeats: kube jobs writes 1 to %d repeats", m.Repeat, m.Repeats, MaxRepeats)
	}
	p, err := experiment.ParsePoint(m.Point)
	if err != nil {
		return err
	}
	var keys []string
	for _, kv := range p {
		if len(kv.Value) > maxPointBytes || !plain(kv.Value) || !coordinate(kv.Key, kv.Value) {
			return implausible("point coordinate %s = %.40q is not one kube jobs writes", kv.Key, kv.Value)
		}
		keys = append(keys, kv.Key)
	}
	if want := exp.PointKeys(); !slices.Equal(keys, want) {
		return implausible("%s point with coordinates %.80q, want %s", m.Sweep, strings.Join(keys, ","), strings.Join(want, ","))
	}
	if err := checkSpec(exp, m.Quick, m.Spec); err != nil {
		return err
	}
	// The pods of the point, on a node of as many CPUs as the point
	// needs: a count that depends on the node's size (throughput's batch)
	// is not compared.
	one, err1 := exp.Pods(p, 1)
	two, err2 := exp.Pods(p, 2)
	if err1 != nil || err2 != nil {
		return implausible("%s point %s is not one kube jobs writes", m.Sweep, p.Label())
	}
	if one.Pods == two.Pods && one.Pods != m.Pods {
		return implausible("%s point %s runs %d pods, the result says %d", m.Sweep, p.Label(), one.Pods, m.Pods)
	}
	return nil
}

// checkSpec checks that spec is a spec of experiment exp, and configures
// exp with it.
func checkSpec(exp experiment.Cluster, quick bool, spec json.RawMessage) error {
	sweep := exp.Name()
	if len(spec) > maxSpecBytes {
		return implausible("spec of %d bytes, kube jobs writes at most %d", len(spec), maxSpecBytes)
	}
	if t := bytes.TrimSpace(spec); len(t) == 0 || t[0] != '{' {
		return implausible("spec %.40q is not an object", spec)
	}
	key := fmt.Sprintf("%s\x00%t\x00%s", sweep, quick, spec)
	if _, ok := specsSeen.Load(key); !ok {
		doc, err := json.Marshal(map[string]json.RawMessage{sweep: spec})
		if err != nil {
			return implausible("spec: %v", err)
		}
		if err := experiment.Configure([]experiment.Cluster{exp}, doc, quick); err != nil {
			return implausible("spec: %v", err)
		}
		specsSeen.Store(key, true)
	}
	p := experiment.Params{Quick: quick, Experiments: []experiment.ExperimentParams{{Name: sweep, Spec: spec}}}
	if _, err := p.Apply(exp); err != nil {
		return implausible("spec: %v", err)
	}
	return nil
}

// specsSeen caches the specs checkSpec accepted: a collection carries the
// same spec in every result.
var specsSeen sync.Map // sweep + "\x00" + quick + "\x00" + spec -> true

// checkJob checks the run's result against what `corepin run` can
// produce for one job in a pod, with its dates in w.
func checkJob(j runner.JobResult, w window) error {
	type num struct {
		name    string
		v, max  float64
		mustPos bool
	}
	wall := j.WallS
	nums := []num{
		{name: "wall_s", v: wall, max: maxWallS},
		{name: "cpus", v: j.CPUs, max: maxNodeCPUs},
		{name: "threads", v: float64(j.Threads), max: maxThreads},
		{name: "user_s", v: j.UserS, max: (wall + 1) * maxNodeCPUs},
		{name: "sys_s", v: j.SysS, max: (wall + 1) * maxNodeCPUs},
		{name: "max_rss_kb", v: float64(j.MaxRSSKB), max: maxRSSKB},
		{name: "migrations", v: float64(j.Migrations), max: maxCount},
		{name: "ctx_switches", v: float64(j.CtxSwitches), max: maxCount},
		{name: "run_delay_s", v: j.RunDelayS, max: (wall + 1) * maxThreads},
		{name: "throttled_periods", v: float64(j.ThrottledPeriods), max: maxCount},
		{name: "throttled_s", v: j.ThrottledS, max: (wall + 1) * maxNodeCPUs},
		{name: "nr_periods", v: float64(j.NrPeriods), max: maxCount},
		{name: "fps", v: j.FPS, max: maxRate},
		{name: "ops_per_s", v: j.OpsPerSec, max: maxRate},
		{name: "frames", v: float64(j.Frames), max: maxRate * maxWallS},
		{name: "ops", v: float64(j.Ops), max: maxRate * maxWallS},
		{name: "job", v: float64(j.Job), max: maxPods},
	}
	if j.PSISomeS != nil {
		nums = append(nums, num{name: "psi_some_s", v: *j.PSISomeS, max: wall*1.1 + 1})
	}
	if j.PSIFullS != nil {
		nums = append(nums, num{name: "psi_full_s", v: *j.PSIFullS, max: wall*1.1 + 1})
	}
	if j.FramesPerS != nil {
		nums = append(nums, num{name: "frames_per_s", v: *j.FramesPerS, max: maxRate})
	}
	if j.OpsPerS != nil {
		nums = append(nums, num{name: "ops_per_s", v: *j.OpsPerS, max: maxRate})
	}
	for _, n := range nums {
		if math.IsNaN(n.v) || math.IsInf(n.v, 0) || n.v < 0 || n.v > n.max {
			return implausible("%s %v outside [0, %g]", n.name, n.v, n.max)
		}
	}
	work := max(float64(j.Frames), float64(j.Ops))
	if wall > 0 && work/wall > maxRate {
		return implausible("%g frames or ops in %v s: over %g a second", work, wall, maxRate)
	}
	if wall == 0 && work > 0 {
		return implausible("%g frames or ops in no time", work)
	}
	if j.ExitCode < -1 || j.ExitCode > 255 {
		return implausible("exit code %d outside [-1, 255]", j.ExitCode)
	}
	if _, err := runner.ParseMode(j.Mode); err != nil {
		return implausible("mode %.40q", j.Mode)
	}
	switch j.QoS {
	case "", "LSE", "LSR", "LS", "BE":
	default:
		return implausible("qos %.40q", j.QoS)
	}
	switch j.PSIScope {
	case "", "group", "system":
	default:
		return implausible("psi_scope %.40q", j.PSIScope)
	}
	for _, s := range []struct {
		name, v string
		max     int
		text    bool
	}{
		{"cmd", j.Cmd, maxCmdBytes, false},
		{"signal", j.Signal, maxShortBytes, false},
		{"error", j.Error, maxErrorBytes, true},
	} {
		if err := checkString(s.name, s.v, s.max, s.text); err != nil {
			return err
		}
	}
	// The tails are the job's own output, whatever it printed: bounded in
	// size only.
	for _, s := range []struct{ name, v string }{{"stderr_tail", j.StderrTail}, {"stdout_tail", j.StdoutTail}} {
		if len(s.v) > maxTailBytes || !utf8.ValidString(s.v) {
			return implausible("%s of %d bytes, over %d or not UTF-8", s.name, len(s.v), maxTailBytes)
		}
	}
	for _, c := range []struct{ name, v string }{{"cpuset", j.Cpuset}, {"cpus_used", j.CPUsUsed}} {
		if c.v == "" {
			continue
		}
		s, err := cpuset.Parse(c.v)
		if err != nil || s.String() != c.v || s.Max() >= maxNodeCPUs {
			return implausible("%s %.40q is not a CPU list of a node", c.name, c.v)
		}
	}
	if len(j.Leftovers) > maxLeftovers {
		return implausible("%d leftover processes, corepin run lists at most %d", len(j.Leftovers), maxLeftovers)
	}
	for _, l := range j.Leftovers {
		if l.PID < 1 || l.PID > maxPID || len(l.Comm) > maxCommBytes || !utf8.ValidString(l.Comm) {
			return implausible("leftover process %d (%.20q)", l.PID, l.Comm)
		}
	}
	for _, t := range []struct {
		name string
		v    time.Time
	}{{"started_at", j.StartedAt}, {"finished_at", j.FinishedAt}} {
		if !t.v.IsZero() && (t.v.Before(w.from) || t.v.After(w.to)) {
			return implausible("%s %s outside [%s, %s] (the pod's life, %v slack)", t.name,
				t.v.UTC().Format(time.RFC3339), w.from.UTC().Format(time.RFC3339), w.to.UTC().Format(time.RFC3339), ClockSlack)
		}
	}
	if !j.StartedAt.IsZero() && !j.FinishedAt.IsZero() {
		d := j.FinishedAt.Sub(j.StartedAt).Seconds()
		if d < 0 || math.Abs(d-wall) > maxWallSkewS {
			return implausible("started_at to finished_at is %.3f s, wall_s %v", d, wall)
		}
	}
	return checkExtra(j.Extra)
}

// checkString checks a string field: at most max bytes of valid UTF-8,
// without control characters (text allows newlines and tabs).
func checkString(name, s string, max int, text bool) error {
	if len(s) > max {
		return implausible("%s of %d bytes, over %d", name, len(s), max)
	}
	if !utf8.ValidString(s) {
		return implausible("%s is not UTF-8", name)
	}
	for _, r := range s {
		if (r < ' ' || r == 0x7f) && !(text && (r == '\n' || r == '\t' || r == '\r')) {
			return implausible("%s holds control character %U", name, r)
		}
	}
	return nil
}

// coordinate is false for a numeric coordinate out of its range: CPUs
// above a node's, more pods than a Job runs, more threads than a job may
// start.
func coordinate(key, v string) bool {
	f, err := strconv.ParseFloat(v, 64)
	switch key {
	case "cpus":
		return err == nil && f > 0 && f <= maxNodeCPUs
	case "concurrency":
		return err == nil && f >= 1 && f <= maxPods
	case "threads":
		return v == "auto" || err == nil && f >= 1 && f <= maxThreads
	}
	return true
}

// plain is true for a point coordinate: letters, digits, '.', '_', '-'.
func plain(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// checkExtra checks a job's extra document: an object of at most
// maxExtraKeys snake_case keys whose values are short strings, finite
// bounded numbers, booleans, or small arrays and objects of the same,
// nested at most maxExtraDepth deep.
func checkExtra(raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	if len(raw) > maxExtraBytes {
		return implausible("extra of %d bytes, over %d", len(raw), maxExtraBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return implausible("extra: %v", err)
	}
	if _, ok := v.(map[string]any); !ok {
		return implausible("extra is not an object")
	}
	return checkExtraValue("extra", v, 0)
}

func checkExtraValue(path string, v any, depth int) error {
	if depth > maxExtraDepth {
		return implausible("%s nested deeper than %d", path, maxExtraDepth)
	}
	switch v := v.(type) {
	case nil, bool:
		return nil
	case string:
		return checkString(path, v, maxErrorBytes, true)
	case json.Number:
		f, err := v.Float64()
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > maxExtraValue {
			return implausible("%s %.40s outside [-%g, %g]", path, v, maxExtraValue, maxExtraValue)
		}
		return nil
	case []any:
		if len(v) > maxExtraItems {
			return implausible("%s has %d items, over %d", path, len(v), maxExtraItems)
		}
		for i, x := range v {
			if err := checkExtraValue(fmt.Sprintf("%s[%d]", path, i), x, depth+1); err != nil {
				return err
			}
		}
		return nil
	case map[string]any:
		if len(v) > maxExtraKeys {
			return implausible("%s has %d keys, over %d", path, len(v), maxExtraKeys)
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if !extraKey(k) {
				return implausible("%s key %.40q: want up to %d of a-z, 0-9 and _", path, k, maxExtraKey)
			}
			if err := checkExtraValue(path+"."+k, v[k], depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return implausible("%s holds %T", path, v)
}

// extraKey is true for a snake_case key of at most maxExtraKey bytes.
func extraKey(k string) bool {
	if k == "" || len(k) > maxExtraKey || k[0] < 'a' || k[0] > 'z' {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}
