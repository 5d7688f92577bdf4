package store

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"time"
)

// JobCSVHeader is the header row of WriteJobsCSV: the jobs table's columns,
// named like Job's JSON keys.
var JobCSVHeader = []string{
	"run_id", "job", "cmd", "mode", "qos", "cpus", "threads", "cpuset",
	"wall_s", "user_s", "sys_s", "max_rss_kb", "cpus_used", "migrations", "ctx_switches",
	"run_delay_s", "throttled_periods", "throttled_s", "nr_periods", "exit_code", "signal",
	"stderr_tail", "frames_per_s", "ops_per_s", "started_at", "finished_at", "extra",
}

// Record returns j as one CSV row in the order of JobCSVHeader. Numbers
// are written in the shortest form that reads back exactly; a nil
// throughput and a zero time are empty fields; times are RFC 3339 in UTC.
func (j Job) Record() []string {
	return []string{
		itoa(j.RunID), itoa(int64(j.Job)), j.Cmd, j.Mode, j.QoS, ftoa(j.CPUs), itoa(int64(j.Threads)), j.Cpuset,
		ftoa(j.WallS), ftoa(j.UserS), ftoa(j.SysS), itoa(j.MaxRSSKB), j.CPUsUsed, itoa(j.Migrations), itoa(j.CtxSwitches),
		ftoa(j.RunDelayS), itoa(j.ThrottledPeriods), ftoa(j.ThrottledS), itoa(j.NrPeriods), itoa(int64(j.ExitCode)), j.Signal,
		j.StderrTail, fptoa(j.FramesPerS), fptoa(j.OpsPerS), ttoa(j.StartedAt), ttoa(j.FinishedAt), string(j.Extra),
	}
}

// MeasurementCSVHeader is the header row of WriteMeasurementsCSV.
var MeasurementCSVHeader = []string{"run_id", "experiment", "point", "metric", "value", "repeat"}

// Record returns m as one CSV row in the order of MeasurementCSVHeader; the
// point stays one JSON document in one field.
func (m Measurement) Record() []string {
	return []string{itoa(m.RunID), m.Experiment, string(m.Point), m.Metric, ftoa(m.Value), itoa(int64(m.Repeat))}
}

// WriteJobsCSV writes a header row and one row per job as RFC 4180 CSV.
func WriteJobsCSV(w io.Writer, jobs []Job) error {
	cw := csv.NewWriter(w)
	cw.Write(JobCSVHeader)
	for _, j := range jobs {
		cw.Write(j.Record())
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("writing CSV: %w", err)
	}
	return nil
}

// WriteMeasurementsCSV writes a header row and one row per measurement as
// RFC 4180 CSV.
func WriteMeasurementsCSV(w io.Writer, ms []Measurement) error {
	cw := csv.NewWriter(w)
	cw.Write(MeasurementCSVHeader)
	for _, m := range ms {
		cw.Write(m.Record())
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("writing CSV: %w", err)
	}
	return nil
}

func itoa(i int64) string   { return strconv.FormatInt(i, 10) }
func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func fptoa(p *float64) string {
	if p == nil {
		return ""
	}
	return ftoa(*p)
}

func ttoa(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}
