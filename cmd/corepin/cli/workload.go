package cli

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/corepin/corepin/workload"
)

const workloadUsage = `Run one of the workloads corepin places and benchmarks, and report its
throughput: a real x264 transcode (ffmpeg with libx264) or a pure-Go CPU
kernel for machines without ffmpeg.

--threads auto (the default) means $COREPIN_THREADS when set (corepin run sets
it to the threads it sized the job to), else the CPUs this process may run on
(its affinity mask: inside a pinned cpuset, the cpuset's size).

Examples:
  corepin workload transcode
  corepin workload transcode --threads 2 -o json
  corepin workload spin --seconds 2 --threads 2
  corepin run --jobs 4 --cpus 2 -- corepin workload transcode --threads {threads}`

const transcodeUsage = `Encode a generated 1080p test clip with ffmpeg and libx264 (CRF 22, preset
medium, -threads N), as the seeds' transcode did, and report frames per second.

The clip (ffmpeg's testsrc2 pattern, losslessly compressed) is generated once
and cached in $XDG_CACHE_HOME/corepin (or ~/.cache/corepin); concurrent jobs
wait for one generation. Only the encode is timed. Output is discarded unless
--write is given, which writes a temporary file and deletes it after.

Needs ffmpeg with libx264: apt-get install ffmpeg.

Examples:
  corepin workload transcode                      # 5 s of 1080p30, threads auto
  corepin workload transcode --threads 2 -o json
  corepin workload transcode --quick              # a 2 s clip
  corepin workload transcode --prepare            # only make the clip; print its path
  corepin workload transcode --size 1280x720 --preset veryfast --write`

const spinUsage = `Run a pure-Go CPU-bound integer kernel on N threads for S seconds and report
operations per second. Each op is the same fixed work, so ops/s compare
across runs of one corepin binary; it needs nothing installed. With --ops the
threads share a fixed amount of work instead, and the wall time shows how
much CPU the job got.

Examples:
  corepin workload spin
  corepin workload spin --seconds 2 --threads 2 -o json
  corepin workload spin --ops 200000 --threads {threads}   # under corepin run`

func init() { register(newWorkloadCmd) }

func newWorkloadCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "workload",
		Short: "Run a benchmark workload: an x264 transcode or a CPU kernel",
		Long:  workloadUsage,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return Usagef("workload needs a subcommand: transcode or spin")
		},
	}
	cmd.AddCommand(newTranscodeCmd(e), newSpinCmd(e), newWakeupCmd(e))
	return cmd
}

// signalContext ends on SIGINT or SIGTERM, so ffmpeg is stopped and
// temporary files are removed when corepin run or a person stops the job.
func signalContext(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(contextOf(cmd), os.Interrupt, syscall.SIGTERM)
}

// resolveThreads turns --threads into a count; a bad value, in the flag or
// in $COREPIN_THREADS, is bad input.
func resolveThreads(spec string) (int, error) {
	n, err := workload.ResolveThreads(spec)
	if err != nil {
		return 0, &UsageError{Err: fmt.Errorf("--threads: %w", err)}
	}
	return n, nil
}

func newTranscodeCmd(e *env) *cobra.Command {
	var (
		threads, size, preset, cacheDir, ffmpeg string
		seconds, fps, crf                       int
		quick, write, prepare                   bool
	)
	cmd := &cobra.Command{
		Use:   "transcode",
		Short: "Encode a cached 1080p clip with ffmpeg/libx264 and report frames/s",
		Long:  transcodeUsage,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w, h, err := parseSize(size)
			if err != nil {
				return err
			}
			if quick && !cmd.Flags().Changed("seconds") {
				seconds = workload.QuickClipSeconds
			}
			switch {
			case seconds < 1:
				return Usagef("--seconds %d: want a clip of at least 1 s", seconds)
			case fps < 1:
				return Usagef("--fps %d: want at least 1", fps)
			case crf < 0 || crf > 51:
				return Usagef("--crf %d: want 0-51", crf)
			case preset == "" || strings.HasPrefix(preset, "-"):
				return Usagef("--preset %q: want an x264 preset such as medium or veryfast", preset)
			}
			n, err := resolveThreads(threads)
			if err != nil {
				return err
			}
			ctx, stop := signalContext(cmd)
			defer stop()
			if err := workload.CheckFFmpeg(ctx, ffmpeg); err != nil {
				return err
			}
			copts := workload.ClipOptions{Dir: cacheDir, Seconds: seconds, Width: w, Height: h, FPS: fps, FFmpeg: ffmpeg,
				Generating: func(path string) {
					fmt.Fprintf(e.stderr, "corepin: generating the test clip once (%dx%d, %d s at %d fps): %s\n", w, h, seconds, fps, path)
				}}
			clip, err := workload.Clip(ctx, copts)
			if err != nil {
				return err
			}
			if prepare {
				if e.JSON() {
					return e.PrintJSON(map[string]any{"clip": clip, "frames": copts.Frames()})
				}
				_, err := fmt.Fprintln(e.stdout, clip)
				return err
			}
			topts := workload.TranscodeOptions{Clip: clip, Threads: n, CRF: crf, Preset: preset, FFmpeg: ffmpeg, WriteTemp: write}
			if crf == 0 {
				topts.CRF = -1 // the library's spelling of crf 0
			}
			res, err := workload.Transcode(ctx, topts)
			if err != nil {
				return err
			}
			rep := workload.NewTranscodeReport(res, copts, topts, clip)
			if e.JSON() {
				return e.PrintJSON(rep)
			}
			_, err = fmt.Fprintln(e.stdout, rep)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&threads, "threads", "auto", "encoder threads: auto, N or native (auto: $COREPIN_THREADS, else the CPUs this process may use; native: ffmpeg's own auto)")
	f.IntVar(&seconds, "seconds", workload.DefaultClipSeconds, "clip length in seconds")
	f.BoolVar(&quick, "quick", false, fmt.Sprintf("use a %d s clip (unless --seconds is given)", workload.QuickClipSeconds))
	f.StringVar(&size, "size", fmt.Sprintf("%dx%d", workload.DefaultWidth, workload.DefaultHeight), "clip size WxH (even numbers)")
	f.IntVar(&fps, "fps", workload.DefaultFPS, "clip frame rate")
	f.IntVar(&crf, "crf", workload.DefaultCRF, "x264 constant rate factor, 0-51")
	f.StringVar(&preset, "preset", workload.DefaultPreset, "x264 preset")
	f.StringVar(&cacheDir, "cache-dir", "", "where the clip is cached (default $XDG_CACHE_HOME/corepin or ~/.cache/corepin)")
	f.BoolVar(&write, "write", false, "write the encode to a temporary file (deleted after) instead of discarding it")
	f.BoolVar(&prepare, "prepare", false, "only generate and cache the clip, print its path, and exit")
	f.StringVar(&ffmpeg, "ffmpeg", workload.DefaultFFmpeg, "ffmpeg binary")
	return cmd
}

// parseSize reads WxH with positive even numbers (yuv420p needs them).
func parseSize(s string) (w, h int, err error) {
	ws, hs, ok := strings.Cut(strings.ToLower(s), "x")
	w, errW := strconv.Atoi(ws)
	h, errH := strconv.Atoi(hs)
	if !ok || errW != nil || errH != nil || w < 2 || h < 2 || w%2 != 0 || h%2 != 0 || w > 16384 || h > 16384 {
		return 0, 0, Usagef("--size %q: want WxH with even numbers, e.g. 1920x1080", s)
	}
	return w, h, nil
}

func newSpinCmd(e *env) *cobra.Command {
	var (
		threads string
		seconds float64
		ops     int64
		nice    int
	)
	cmd := &cobra.Command{
		Use:   "spin",
		Short: "Run a pure-Go CPU kernel and report ops/s",
		Long:  spinUsage,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !(seconds > 0) || math.IsInf(seconds, 0) || seconds > 1e6 {
				return Usagef("--seconds %v: want a positive number of seconds", seconds)
			}
			opts := workload.SpinOptions{Duration: time.Duration(seconds * float64(time.Second))}
			if cmd.Flags().Changed("ops") {
				if cmd.Flags().Changed("seconds") {
					return Usagef("--ops and --seconds: give one of them")
				}
				if ops < 1 {
					return Usagef("--ops %d: want a positive count", ops)
				}
				opts = workload.SpinOptions{Ops: ops}
			}
			n, err := resolveThreads(threads)
			if err != nil {
				return err
			}
			if n == 0 {
				n = runtime.NumCPU() // native: one per CPU of the machine
			}
			// Let every thread run at once, as an encoder's threads would:
			// GOMAXPROCS may be lower than N (Go sizes it to the cgroup quota).
			if runtime.GOMAXPROCS(0) < n {
				runtime.GOMAXPROCS(n)
			}
			ctx, stop := signalContext(cmd)
			defer stop()
			if nice < 0 || nice > 19 {
				return Usagef("--nice %d: want 0..19 (lower is not for a batch)", nice)
			}
			opts.Threads, opts.Nice = n, nice
			res, err := workload.Spin(ctx, opts)
			if err != nil && !errors.Is(err, context.Canceled) {
				return err
			}
			if res.NiceKept {
				fmt.Fprintf(e.stderr, "corepin: note: --nice %d is below this process's nice %d, which it may not lower (no CAP_SYS_NICE): the threads spun at nice %d\n", nice, res.Nice, res.Nice)
			}
			rep := workload.NewSpinReport(res, opts)
			if e.JSON() {
				if perr := e.PrintJSON(rep); perr != nil {
					return perr
				}
			} else {
				fmt.Fprintln(e.stdout, rep)
			}
			return err // a stopped spin still reports what it did
		},
	}
	cmd.Flags().StringVar(&threads, "threads", "auto", "spinning threads: auto, N or native (auto: $COREPIN_THREADS, else the CPUs this process may use; native: one per CPU of the machine)")
	cmd.Flags().Float64Var(&seconds, "seconds", 5, "how long to spin")
	cmd.Flags().IntVar(&nice, "nice", 0, "nice value 0..19 of every spinning thread (the nice study's batch, without nice(1))")
	cmd.Flags().Int64Var(&ops, "ops", 0, "spin until this many ops are done, shared by the threads, instead of for --seconds")
	return cmd
}
