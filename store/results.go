package store

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"modernc.org/sqlite"

	"github.com/corepin/corepin/measure"
)

// Run is one invocation of `corepin run` or `corepin bench`: what was run,
// with which parameters, on which machine and kernel.
type Run struct {
	ID         int64     `json:"id"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at,omitzero"` // zero while running, or if the run was killed
	// Command is the command or experiment name ("run", "bench scaling").
	Command string `json:"command"`
	// Params holds the flags or experiment parameters as a JSON document.
	Params          json.RawMessage `json:"params,omitempty"`
	CorepinVersion  string          `json:"corepin_version"`
	Kernel          string          `json:"kernel"` // uname -r, as the caller read it
	Hostname        string          `json:"hostname"`
	TopologySummary string          `json:"topology_summary"` // one line, e.g. "2 sockets, 16 cores, 32 CPUs"
	// Topology is the `corepin topo -o json` document of the machine.
	Topology json.RawMessage `json:"topology,omitempty"`
	// Jobs is the number of job rows the run has; filled by Runs, ignored
	// by BeginRun.
	Jobs int `json:"jobs"`
	// Owner is the corepin process running the run (measure.Identity in
	// its String form), set by NewRun; empty in files from before schema 2.
	Owner string `json:"owner,omitempty"`
	// InterruptedAt is when a later corepin found the owner gone before
	// the run finished (MarkInterrupted).
	InterruptedAt time.Time `json:"interrupted_at,omitzero"`
	// Status is RunFinished, RunInterrupted, RunRunning or, for an
	// unfinished run of a file from before schema 2, RunUnknown; filled by
	// Runs, ignored by BeginRun.
	Status string `json:"status"`
}

// Run statuses (Run.Status).
const (
	RunFinished    = "finished"
	RunInterrupted = "interrupted" // its corepin process died before it finished
	RunRunning     = "running"
	RunUnknown     = "unfinished" // no owner recorded: may run, may have died
)

// ownerAlive reports whether the process an Owner string names still runs;
// an unparsable owner counts as alive, so nothing is marked on a guess.
func ownerAlive(owner string) bool {
	id, err := measure.ParseIdentity(owner)
	return err != nil || id.Alive("/proc")
}

// status derives a run's status from what the file holds and whether its
// owner still runs.
func (r Run) status() string {
	switch {
	case !r.FinishedAt.IsZero():
		return RunFinished
	case !r.InterruptedAt.IsZero():
		return RunInterrupted
	case r.Owner == "":
		return RunUnknown
	case !ownerAlive(r.Owner):
		return RunInterrupted
	}
	return RunRunning
}

// Job is the outcome of one job of a run. Its JSON keys are those of
// `corepin run -o json` where the two overlap (job, cpuset, mode, wall_s,
// user_s, sys_s, cpus_used, migrations, throttled_s, exit_code). CPU sets
// are strings in Linux list format; times are seconds.
type Job struct {
	RunID            int64   `json:"run_id,omitempty"` // filled by Jobs, ignored by AddJob
	Job              int     `json:"job"`              // the job's number within its run, from 0
	Cmd              string  `json:"cmd"`
	Mode             string  `json:"mode"` // pinned, quota, burst or unbounded
	QoS              string  `json:"qos"`  // LSE, LSR, LS or BE
	CPUs             float64 `json:"cpus"` // CPUs requested
	Threads          int     `json:"threads"`
	Cpuset           string  `json:"cpuset"`
	WallS            float64 `json:"wall_s"`
	UserS            float64 `json:"user_s"`
	SysS             float64 `json:"sys_s"`
	MaxRSSKB         int64   `json:"max_rss_kb"`
	CPUsUsed         string  `json:"cpus_used"`
	Migrations       int64   `json:"migrations"`
	CtxSwitches      int64   `json:"ctx_switches"`
	RunDelayS        float64 `json:"run_delay_s"`
	ThrottledPeriods int64   `json:"throttled_periods"`
	ThrottledS       float64 `json:"throttled_s"`
	NrPeriods        int64   `json:"nr_periods"`
	ExitCode         int     `json:"exit_code"`
	Signal           string  `json:"signal,omitempty"` // e.g. "SIGKILL" when a signal ended the job
	StderrTail       string  `json:"stderr_tail,omitempty"`
	// FramesPerS and OpsPerS are the workload's own throughput, where it
	// reported one; nil otherwise.
	FramesPerS *float64        `json:"frames_per_s,omitempty"`
	OpsPerS    *float64        `json:"ops_per_s,omitempty"`
	StartedAt  time.Time       `json:"started_at,omitzero"`
	FinishedAt time.Time       `json:"finished_at,omitzero"`
	Extra      json.RawMessage `json:"extra,omitempty"` // anything else, as one JSON document
}

// Measurement is one value measured by `corepin bench`: metric at a point
// of an experiment's parameter space, in one repeat.
type Measurement struct {
	RunID      int64           `json:"run_id"` // filled by Measurements, ignored by AddMeasurement
	Experiment string          `json:"experiment"`
	Point      json.RawMessage `json:"point,omitempty"` // e.g. {"mode":"pinned","concurrency":4}
	Metric     string          `json:"metric"`
	Value      float64         `json:"value"`
	Repeat     int             `json:"repeat"`
}

// RunFilter selects runs; its zero value selects all of them.
type RunFilter struct {
	ID      int64     // only this run
	Command string    // only runs of this command
	Since   time.Time // only runs started at or after this time
	Limit   int       // only the newest Limit runs (still listed oldest first)
}

// BeginRun records the start of a run and returns its id. A zero StartedAt
// means now. r.ID and r.FinishedAt are ignored.
func (db *DB) BeginRun(r Run) (int64, error) {
	if r.Command == "" {
		return 0, fmt.Errorf("beginning a run: empty command")
	}
	params, err := jsonArg("params", r.Params)
	if err != nil {
		return 0, fmt.Errorf("beginning a run: %w", err)
	}
	topo, err := jsonArg("topology", r.Topology)
	if err != nil {
		return 0, fmt.Errorf("beginning a run: %w", err)
	}
	if r.StartedAt.IsZero() {
		r.StartedAt = time.Now()
	}
	res, err := db.durableExec(`INSERT INTO runs
		(started_at, command, params, corepin_version, kernel, hostname, topology_summary, topology, owner)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		timeArg(r.StartedAt), r.Command, params, r.CorepinVersion, r.Kernel, r.Hostname, r.TopologySummary, topo, r.Owner)
	if err != nil {
		return 0, fmt.Errorf("beginning a run: %w", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("beginning a run: %w", err)
	}
	return id, nil
}

// FinishRun records when run id finished; a zero at means now. It returns
// ErrNotFound for an unknown id. A run never finished (killed) keeps a
// NULL finished_at and the jobs it added.
func (db *DB) FinishRun(id int64, at time.Time) error {
	if at.IsZero() {
		at = time.Now()
	}
	res, err := db.durableExec(`UPDATE runs SET finished_at = ? WHERE id = ?`, timeArg(at), id)
	if err != nil {
		return fmt.Errorf("finishing run %d: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("finishing run %d: %w", id, err)
	} else if n == 0 {
		return fmt.Errorf("finishing run %d: %w", id, ErrNotFound)
	}
	return nil
}

// MarkInterrupted records, for every unfinished run whose owner process
// is gone, that it was interrupted (now), and returns their ids. A run
// without an owner (from before schema 2) is left alone: nothing says
// whether it still runs.
func (db *DB) MarkInterrupted() ([]int64, error) {
	var ids []int64
	err := db.durableTx(func(tx *sql.Tx) error {
		rows, err := tx.Query(`SELECT id, owner FROM runs
			WHERE finished_at IS NULL AND interrupted_at IS NULL AND owner != ''`)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id int64
			var owner string
			if err := rows.Scan(&id, &owner); err != nil {
				rows.Close()
				return err
			}
			if !ownerAlive(owner) {
				ids = append(ids, id)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		now := timeArg(time.Now())
		for _, id := range ids {
			if _, err := tx.Exec(`UPDATE runs SET interrupted_at = ? WHERE id = ?`, now, id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("marking interrupted runs: %w", err)
	}
	return ids, nil
}

// AddJob records one finished job of run runID, committed on its own, so a
// run killed halfway keeps every job added before. It returns ErrNotFound
// for an unknown run and ErrExists if the run already has a job j.Job.
func (db *DB) AddJob(runID int64, j Job) error {
	if err := j.validate(); err != nil {
		return fmt.Errorf("adding job %d of run %d: %w", j.Job, runID, err)
	}
	extra, err := jsonArg("extra", j.Extra)
	if err != nil {
		return fmt.Errorf("adding job %d of run %d: %w", j.Job, runID, err)
	}
	_, err = db.durableExec(`INSERT INTO jobs (`+jobColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		runID, j.Job, j.Cmd, j.Mode, j.QoS, j.CPUs, j.Threads, j.Cpuset,
		j.WallS, j.UserS, j.SysS, j.MaxRSSKB, j.CPUsUsed, j.Migrations, j.CtxSwitches,
		j.RunDelayS, j.ThrottledPeriods, j.ThrottledS, j.NrPeriods, j.ExitCode, j.Signal,
		j.StderrTail, floatPtrArg(j.FramesPerS), floatPtrArg(j.OpsPerS),
		timeArg(j.StartedAt), timeArg(j.FinishedAt), extra)
	if err != nil {
		return fmt.Errorf("adding job %d of run %d: %w", j.Job, runID, constraintErr(err))
	}
	return nil
}

// jobColumns lists the jobs table's columns in the order of scanJob.
const jobColumns = `run_id, job, cmd, mode, qos, cpus, threads, cpuset,
	wall_s, user_s, sys_s, max_rss_kb, cpus_used, migrations, ctx_switches,
	run_delay_s, throttled_periods, throttled_s, nr_periods, exit_code, signal,
	stderr_tail, frames_per_s, ops_per_s, started_at, finished_at, extra`

type namedFloat struct {
	name string
	v    float64
}

// validate rejects values SQLite or JSON can't keep: NaN and infinities.
func (j *Job) validate() error {
	fs := []namedFloat{{"cpus", j.CPUs}, {"wall_s", j.WallS}, {"user_s", j.UserS}, {"sys_s", j.SysS},
		{"run_delay_s", j.RunDelayS}, {"throttled_s", j.ThrottledS}}
	if j.FramesPerS != nil {
		fs = append(fs, namedFloat{"frames_per_s", *j.FramesPerS})
	}
	if j.OpsPerS != nil {
		fs = append(fs, namedFloat{"ops_per_s", *j.OpsPerS})
	}
	for _, f := range fs {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return fmt.Errorf("%s is %v: want a finite number", f.name, f.v)
		}
	}
	return nil
}

// AddMeasurement records measurements of run runID, all in one transaction.
func (db *DB) AddMeasurement(runID int64, ms ...Measurement) error {
	for _, m := range ms {
		if m.Experiment == "" || m.Metric == "" {
			return fmt.Errorf("adding a measurement to run %d: empty experiment or metric", runID)
		}
		if math.IsNaN(m.Value) || math.IsInf(m.Value, 0) {
			return fmt.Errorf("adding measurement %s/%s to run %d: value is %v: want a finite number", m.Experiment, m.Metric, runID, m.Value)
		}
	}
	return db.durableTx(func(tx *sql.Tx) error {
		st, err := tx.Prepare(`INSERT INTO measurements (run_id, experiment, point, metric, value, repeat_index)
			VALUES (?, ?, ?, ?, ?, ?)`)
		if err != nil {
			return fmt.Errorf("adding measurements to run %d: %w", runID, err)
		}
		defer st.Close()
		for _, m := range ms {
			point, err := jsonArg("point", m.Point)
			if err != nil {
				return fmt.Errorf("adding measurement %s/%s to run %d: %w", m.Experiment, m.Metric, runID, err)
			}
			if _, err := st.Exec(runID, m.Experiment, point, m.Metric, m.Value, m.Repeat); err != nil {
				return fmt.Errorf("adding measurement %s/%s to run %d: %w", m.Experiment, m.Metric, runID, constraintErr(err))
			}
		}
		return nil
	})
}

// Runs lists the runs f selects, oldest first, each with its job count.
func (db *DB) Runs(f RunFilter) ([]Run, error) {
	var where []string
	var args []any
	if f.ID != 0 {
		where, args = append(where, "id = ?"), append(args, f.ID)
	}
	if f.Command != "" {
		where, args = append(where, "command = ?"), append(args, f.Command)
	}
	if !f.Since.IsZero() {
		where, args = append(where, "started_at >= ?"), append(args, timeArg(f.Since))
	}
	q := `SELECT id, started_at, finished_at, command, params, corepin_version, kernel,
		hostname, topology_summary, topology,
		(SELECT count(*) FROM jobs WHERE jobs.run_id = runs.id), owner, interrupted_at
		FROM runs`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	if f.Limit > 0 {
		q = `SELECT * FROM (` + q + ` ORDER BY id DESC LIMIT ?)`
		args = append(args, f.Limit)
	}
	q += " ORDER BY id"
	rows, err := db.db.Query(q, args...)
	if err != nil {
		return nil, fmt.Errorf("listing runs: %w", err)
	}
	defer rows.Close()
	var out []Run
	for rows.Next() {
		var r Run
		var started, finished, params, topo, interrupted sql.NullString
		if err := rows.Scan(&r.ID, &started, &finished, &r.Command, &params, &r.CorepinVersion,
			&r.Kernel, &r.Hostname, &r.TopologySummary, &topo, &r.Jobs, &r.Owner, &interrupted); err != nil {
			return nil, fmt.Errorf("listing runs: %w", err)
		}
		var err1, err2, err3 error
		r.StartedAt, err1 = parseTime(started)
		r.FinishedAt, err2 = parseTime(finished)
		r.InterruptedAt, err3 = parseTime(interrupted)
		if err := errors.Join(err1, err2, err3); err != nil {
			return nil, fmt.Errorf("reading run %d: %w", r.ID, err)
		}
		r.Params, r.Topology = rawJSON(params), rawJSON(topo)
		r.Status = r.status()
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing runs: %w", err)
	}
	return out, nil
}

// Jobs lists the jobs of run runID by job index, or, for runID 0, of every
// run by run and job index.
func (db *DB) Jobs(runID int64) ([]Job, error) {
	q := `SELECT ` + jobColumns + ` FROM jobs`
	var args []any
	if runID != 0 {
		q += ` WHERE run_id = ?`
		args = append(args, runID)
	}
	q += ` ORDER BY run_id, job`
	rows, err := db.db.Query(q, args...)
	if err != nil {
		return nil, fmt.Errorf("listing jobs: %w", err)
	}
	defer rows.Close()
	var out []Job
	for rows.Next() {
		var j Job
		var fps, ops sql.NullFloat64
		var started, finished, extra sql.NullString
		if err := rows.Scan(&j.RunID, &j.Job, &j.Cmd, &j.Mode, &j.QoS, &j.CPUs, &j.Threads, &j.Cpuset,
			&j.WallS, &j.UserS, &j.SysS, &j.MaxRSSKB, &j.CPUsUsed, &j.Migrations, &j.CtxSwitches,
			&j.RunDelayS, &j.ThrottledPeriods, &j.ThrottledS, &j.NrPeriods, &j.ExitCode, &j.Signal,
			&j.StderrTail, &fps, &ops, &started, &finished, &extra); err != nil {
			return nil, fmt.Errorf("listing jobs: %w", err)
		}
		var err1, err2 error
		j.StartedAt, err1 = parseTime(started)
		j.FinishedAt, err2 = parseTime(finished)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("reading job %d of run %d: %w", j.Job, j.RunID, err)
		}
		j.FramesPerS, j.OpsPerS = floatPtr(fps), floatPtr(ops)
		j.Extra = rawJSON(extra)
		out = append(out, j)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing jobs: %w", err)
	}
	return out, nil
}

// Measurements lists measurements in the order they were added, of run
// runID (0: every run) and experiment (empty: every experiment).
func (db *DB) Measurements(runID int64, experiment string) ([]Measurement, error) {
	q := `SELECT run_id, experiment, point, metric, value, repeat_index FROM measurements`
	var where []string
	var args []any
	if runID != 0 {
		where, args = append(where, "run_id = ?"), append(args, runID)
	}
	if experiment != "" {
		where, args = append(where, "experiment = ?"), append(args, experiment)
	}
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY id"
	rows, err := db.db.Query(q, args...)
	if err != nil {
		return nil, fmt.Errorf("listing measurements: %w", err)
	}
	defer rows.Close()
	var out []Measurement
	for rows.Next() {
		var m Measurement
		var point sql.NullString
		if err := rows.Scan(&m.RunID, &m.Experiment, &point, &m.Metric, &m.Value, &m.Repeat); err != nil {
			return nil, fmt.Errorf("listing measurements: %w", err)
		}
		m.Point = rawJSON(point)
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing measurements: %w", err)
	}
	return out, nil
}

// jsonArg converts a JSON document for binding: empty is NULL, anything
// else must be valid JSON and is stored as TEXT.
func jsonArg(name string, raw json.RawMessage) (any, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	if !json.Valid(raw) {
		return nil, fmt.Errorf("%s is not valid JSON", name)
	}
	if d := jsonDepth(raw); d > maxJSONDepth {
		return nil, fmt.Errorf("%s nests %d deep, more than SQLite's JSON limit of %d", name, d, maxJSONDepth)
	}
	return string(raw), nil
}

// maxJSONDepth is SQLite's JSON nesting limit (JSON_MAX_DEPTH,
// https://www.sqlite.org/json1.html#jmini); encoding/json allows deeper
// documents, which the json_valid CHECKs would refuse with a less clear error.
const maxJSONDepth = 1000

// jsonDepth returns how deep the valid JSON document b nests arrays and objects.
func jsonDepth(b []byte) int {
	depth, maxDepth, inString, escaped := 0, 0, false, false
	for _, c := range b {
		switch {
		case inString && escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case inString:
		case c == '[' || c == '{':
			depth++
			maxDepth = max(maxDepth, depth)
		case c == ']' || c == '}':
			depth--
		}
	}
	return maxDepth
}

func rawJSON(s sql.NullString) json.RawMessage {
	if !s.Valid {
		return nil
	}
	return json.RawMessage(s.String)
}

func floatPtrArg(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

func floatPtr(f sql.NullFloat64) *float64 {
	if !f.Valid {
		return nil
	}
	return &f.Float64
}

// SQLite extended result codes for constraint failures
// (https://www.sqlite.org/rescode.html#constraint_foreignkey).
const (
	sqliteConstraintForeignKey = 787
	sqliteConstraintPrimaryKey = 1555
	sqliteConstraintUnique     = 2067
)

// constraintErr maps a duplicate key to ErrExists and a missing parent row
// to ErrNotFound; SQLite's own message adds nothing to either.
func constraintErr(err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() {
		case sqliteConstraintPrimaryKey, sqliteConstraintUnique:
			return ErrExists
		case sqliteConstraintForeignKey:
			return fmt.Errorf("run %w", ErrNotFound)
		}
	}
	return err
}

// Results is what `corepin results` exports: runs, their jobs and, when
// asked, bench measurements. Its slices are never nil, so the JSON names
// an empty list rather than null.
type Results struct {
	Runs         []Run         `json:"runs"`
	Jobs         []Job         `json:"jobs"`
	Measurements []Measurement `json:"measurements,omitempty"`
}

// ResultsQuery says what Results reads: run Run (0: every run), and
// whether with the runs' jobs and their measurements.
type ResultsQuery struct {
	Run          int64
	Jobs         bool
	Measurements bool
}

// Results reads what q asks for in one call. A run id that names no run
// is ErrNotFound.
func (db *DB) Results(q ResultsQuery) (Results, error) {
	var r Results
	var err error
	if r.Runs, err = db.Runs(RunFilter{ID: q.Run}); err != nil {
		return Results{}, err
	}
	if q.Run != 0 && len(r.Runs) == 0 {
		return Results{}, fmt.Errorf("run %d: %w", q.Run, ErrNotFound)
	}
	if q.Jobs {
		if r.Jobs, err = db.Jobs(q.Run); err != nil {
			return Results{}, err
		}
	}
	if q.Measurements {
		if r.Measurements, err = db.Measurements(q.Run, ""); err != nil {
			return Results{}, err
		}
	}
	r.Runs, r.Jobs = nonNil(r.Runs), nonNil(r.Jobs)
	if q.Measurements {
		r.Measurements = nonNil(r.Measurements)
	}
	return r, nil
}

func nonNil[T any](xs []T) []T {
	if xs == nil {
		return []T{}
	}
	return xs
}
