package cli

import (
	"encoding/json"
	"errors"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"github.com/corepin/corepin/workload"
)

const wakeupUsage = `The wake-placement probe of corepin bench wakeup (hidden: the bench runs it
as its latency-sensitive side). N threads in one scheduling class wake at the
same instant every period, record the CPU they woke on, burn a fixed CPU time
and read their run-queue wait; it prints every round as one line of JSON.

Examples:
  corepin workload wakeup --threads 2 --rounds 100
  corepin workload wakeup --threads 2 --class rr --burn 2ms --period 10ms`

func newWakeupCmd(e *env) *cobra.Command {
	var o workload.WakeupOptions
	cmd := &cobra.Command{
		Use:    workload.NameWakeup,
		Short:  "Wake threads together every period and record where they run",
		Long:   wakeupUsage,
		Args:   cobra.NoArgs,
		Hidden: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Threads < 1 || o.Threads > workload.MaxWakeupThreads {
				return Usagef("--threads %d: want 1-%d", o.Threads, workload.MaxWakeupThreads)
			}
			// Every thread holds a P when it wakes, as a service's would.
			if runtime.GOMAXPROCS(0) < o.Threads+1 {
				runtime.GOMAXPROCS(o.Threads + 1)
			}
			ctx, stop := signalContext(cmd)
			defer stop()
			res, err := workload.Wakeup(ctx, o)
			if errors.Is(err, workload.ErrInvalid) {
				return &UsageError{Err: err}
			}
			if err != nil {
				return err
			}
			// One line, not indented: the rounds are many numbers.
			return json.NewEncoder(e.stdout).Encode(res)
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&o.Threads, "threads", 2, "threads that wake together")
	fl.DurationVar(&o.Period, "period", 10*time.Millisecond, "time between wakes")
	fl.DurationVar(&o.Burn, "burn", 2*time.Millisecond, "CPU time each thread uses per wake")
	fl.IntVar(&o.Rounds, "rounds", 100, "wakes recorded")
	fl.StringVar(&o.Class, "class", workload.ClassNormal, "scheduling class: normal, rr or fifo (priority 1)")
	return cmd
}
