package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/corepin/corepin/store"
)

const resultsUsage = `Show or export what corepin run and corepin bench recorded in the results
database: runs, their jobs (wall/user/sys time, CPUs used, migrations,
throttling, exit status) and bench measurements.

Without --format it prints a table: the runs, or with --run ID the jobs of
that run. --format csv writes one RFC 4180 row per job (or per measurement
with --measurements) under a header row; --format json (or -o json) writes
{"runs": [...], "jobs": [...]} with the keys of corepin run -o json, plus
"measurements" with --measurements.

The database is --db FILE, else $COREPIN_DB, else
$XDG_DATA_HOME/corepin/results.db, else ~/.local/share/corepin/results.db.

Examples:
  corepin results
  corepin results --run 3
  corepin results --run 3 --format csv > run3.csv
  corepin results --format json | jq '.jobs[] | select(.mode == "pinned") | .wall_s'
  corepin results --measurements --format csv --db bench.db`

func init() { register(newResultsCmd) }

func newResultsCmd(e *env) *cobra.Command {
	var (
		db           string
		runID        int64
		format       string
		measurements bool
	)
	cmd := &cobra.Command{
		Use:   "results",
		Short: "Show or export recorded runs, jobs and measurements (table, CSV, JSON)",
		Long:  resultsUsage,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case format != "" && format != "csv" && format != "json":
				return Usagef("unknown --format %q: use csv or json", format)
			case format == "csv" && e.JSON():
				return Usagef("--format csv and -o json disagree: give one of them")
			case format == "" && e.JSON():
				format = "json"
			}
			if cmd.Flags().Changed("run") && runID <= 0 {
				return Usagef("--run %d: run ids start at 1", runID)
			}
			d, err := openResultsDB(db)
			if err != nil {
				return err
			}
			defer d.Close()
			q := store.ResultsQuery{Run: runID, Measurements: measurements,
				Jobs: format == "json" || !measurements && (format == "csv" || runID != 0)}
			res, err := d.Results(q)
			if errors.Is(err, store.ErrNotFound) {
				return Usagef("no run %d in %s: corepin results lists the runs", runID, d.Path())
			} else if err != nil {
				return err
			}
			switch {
			case format == "json":
				return e.PrintJSON(res)
			case format == "csv" && measurements:
				return store.WriteMeasurementsCSV(e.stdout, res.Measurements)
			case format == "csv":
				return store.WriteJobsCSV(e.stdout, res.Jobs)
			case measurements:
				return printMeasurements(e.stdout, res.Measurements)
			case runID != 0:
				return printJobs(e.stdout, res.Jobs)
			default:
				return printRuns(e.stdout, res.Runs)
			}
		},
	}
	cmd.Flags().StringVar(&db, "db", "", "results database (default $COREPIN_DB, else $XDG_DATA_HOME/corepin/results.db, else ~/.local/share/corepin/results.db)")
	cmd.Flags().Int64Var(&runID, "run", 0, "only this run (default: every run)")
	cmd.Flags().StringVar(&format, "format", "", "export format: csv or json (default: a table)")
	cmd.Flags().BoolVar(&measurements, "measurements", false, "export bench measurements (with --format csv: instead of jobs)")
	return cmd
}

// openResultsDB opens an existing results database read-only: path, or
// store.DefaultPath() when path is empty. A missing file, or one that is
// not a corepin database this binary can read, is bad input (exit 2).
func openResultsDB(path string) (*store.DB, error) {
	path, err := resultsPath(path)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, Usagef("no results database at %s: corepin run and corepin bench write one; or give --db or set %s", path, store.EnvDB)
	}
	// Reading never writes: a database the caller may only read opens
	// (issue 8 §3), and no WAL or journal file appears beside it.
	d, err := store.OpenReadOnly(path)
	if badStoreFile(err) {
		return nil, &UsageError{Err: err}
	}
	return d, err
}

// resultsPath is the results database a --db flag names: path, or
// store.DefaultPath() when it is empty.
func resultsPath(path string) (string, error) {
	if path != "" {
		return path, nil
	}
	return store.DefaultPath()
}

// tableTime formats a time for a table: UTC to the second.
func tableTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.DateTime)
}

func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 8, 3, ' ', 0) }

func printRuns(w io.Writer, runs []store.Run) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "ID\tSTARTED\tFINISHED\tSTATUS\tCOMMAND\tJOBS\tHOST")
	for _, r := range runs {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%s\n", r.ID, tableTime(r.StartedAt), tableTime(r.FinishedAt),
			r.Status, r.Command, r.Jobs, dash(r.Hostname))
	}
	return tw.Flush()
}

func printJobs(w io.Writer, jobs []store.Job) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "JOB\tMODE\tQOS\tCPUSET\tWALL_S\tUSER_S\tSYS_S\tCPUS_USED\tMIGRATIONS\tTHROTTLED_S\tEXIT\tCMD")
	for _, j := range jobs {
		exit := strconv.Itoa(j.ExitCode)
		if j.Signal != "" {
			exit = j.Signal
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%.2f\t%.2f\t%.2f\t%s\t%d\t%.2f\t%s\t%s\n", j.Job, dash(j.Mode), dash(j.QoS),
			dash(j.Cpuset), j.WallS, j.UserS, j.SysS, dash(j.CPUsUsed), j.Migrations, j.ThrottledS, exit, oneLine(j.Cmd))
	}
	return tw.Flush()
}

func printMeasurements(w io.Writer, ms []store.Measurement) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "RUN\tEXPERIMENT\tMETRIC\tVALUE\tREPEAT\tPOINT")
	for _, m := range ms {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%g\t%d\t%s\n", m.RunID, m.Experiment, m.Metric, m.Value, m.Repeat, dash(string(m.Point)))
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine quotes s if it holds control characters, so one job stays one row.
func oneLine(s string) string {
	for _, r := range s {
		if r < ' ' || r == 0x7f {
			return strconv.Quote(s)
		}
	}
	return s
}
