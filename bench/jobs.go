package bench

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/corepin/corepin/experiment"
	"github.com/corepin/corepin/proc"
	"github.com/corepin/corepin/runner"
	"github.com/corepin/corepin/workload"
)

// Workload names in experiment specs.
const (
	WorkloadAuto      = "auto"      // transcode where ffmpeg with libx264 is installed, else spin
	WorkloadTranscode = "transcode" // ffmpeg/libx264 on a cached clip: the seeds' job
	WorkloadSpin      = "spin"      // corepin's pure-Go CPU kernel, fixed work
)

// jobSpec is the job a batch experiment runs, shared by concurrency,
// threads and throughput.
type jobSpec struct {
	// Workload is auto, transcode or spin.
	Workload string `yaml:"workload" json:"workload"`
	// JobSeconds is the target length of one job alone on one CPU; spin
	// work is calibrated to it at setup.
	JobSeconds float64 `yaml:"job_seconds" json:"job_seconds"`
	// Clip is the transcode input: size and length (frames = seconds x 30).
	ClipWidth   int    `yaml:"clip_width" json:"clip_width"`
	ClipHeight  int    `yaml:"clip_height" json:"clip_height"`
	ClipSeconds int    `yaml:"clip_seconds" json:"clip_seconds"`
	Preset      string `yaml:"preset" json:"preset"`
	// Substitute, set by resolveWorkload, says that the spec asked for
	// "auto" and got the spin kernel because ffmpeg is missing: the
	// experiment then measures no transcode, and says so first.
	Substitute string `yaml:"-" json:"substitute,omitempty"`
}

// resolveWorkload settles an "auto" (or empty) workload to transcode where
// ffmpeg with libx264 is installed, else to spin with Substitute saying
// why. ffmpeg's presence is probed once per process.
func (s *jobSpec) resolveWorkload() { s.resolveWith(workload.FFmpegAvailable) }

// resolveWith is resolveWorkload with ffmpeg's probe as a parameter.
func (s *jobSpec) resolveWith(ffmpegAvailable func() error) {
	if s.Workload != "" && s.Workload != WorkloadAuto {
		return
	}
	s.Workload = WorkloadTranscode
	if err := ffmpegAvailable(); err != nil {
		s.Workload = WorkloadSpin
		s.Substitute = fmt.Sprintf("no transcodes measured: %v, so this experiment measures corepin's Go spin kernel instead; install ffmpeg to measure real encodes", err)
	}
}

// unit names what the spec's job reports per second.
func (s jobSpec) unit() string {
	if s.Workload == WorkloadTranscode {
		return "frames"
	}
	return "ops"
}

// job is a resolved jobSpec: the argv template of one job.
type job struct {
	kind  string
	spin  int64 // ops per job
	clip  workload.ClipOptions
	trans workload.TranscodeOptions
	exe   string
	// unit names what the job reports per second: "frames" or "ops".
	unit string
}

// resolveJob decides the workload and prepares it once: generates and
// caches the clip, or calibrates the spin kernel to JobSeconds.
func resolveJob(ctx context.Context, env *Env, s *jobSpec) (*job, error) {
	s.resolveWorkload()
	if s.Substitute != "" {
		env.Logf("%s", s.Substitute)
	}
	j := &job{kind: s.Workload, exe: env.Exe}
	switch j.kind {
	case WorkloadTranscode:
		if err := workload.FFmpegAvailable(); err != nil {
			return nil, fmt.Errorf("workload transcode: %w", err)
		}
		j.clip = workload.ClipOptions{Width: s.ClipWidth, Height: s.ClipHeight, Seconds: s.ClipSeconds}
		j.trans = workload.TranscodeOptions{Preset: s.Preset}
		env.Logf("preparing the %dx%d %d s test clip", s.ClipWidth, s.ClipHeight, s.ClipSeconds)
		if _, err := workload.Clip(ctx, j.clip); err != nil {
			return nil, err
		}
	case WorkloadSpin:
		rate, err := calibrateSpin(ctx, env.Exe)
		if err != nil {
			return nil, err
		}
		j.spin = max(1, int64(rate*s.JobSeconds))
	default:
		return nil, fmt.Errorf("%w: workload %q: use auto, transcode or spin", experiment.ErrUsage, s.Workload)
	}
	j.unit = s.unit()
	return j, nil
}

// calibrateSpin measures the spin kernel's ops/s on one thread.
func calibrateSpin(ctx context.Context, exe string) (float64, error) {
	p, err := proc.Start(ctx, proc.Spec{Argv: append([]string{exe}, workload.SpinArgs(300*time.Millisecond, "1")...)})
	if err != nil {
		return 0, fmt.Errorf("calibrating the spin kernel: %w", err)
	}
	x, err := p.Wait()
	if err == nil && x.Code != 0 {
		err = fmt.Errorf("exit %d%s: %s", x.Code, signalNote(x.Signal), strings.TrimSpace(x.Stderr))
	}
	if err != nil {
		return 0, fmt.Errorf("calibrating the spin kernel: %w", err)
	}
	out := []byte(x.Stdout)
	r, err := workload.ParseReport(out)
	if err != nil || r.Spin == nil || r.Spin.OpsPerS <= 0 {
		return 0, fmt.Errorf("calibrating the spin kernel: %s: %v", out, err)
	}
	return r.Spin.OpsPerS, nil
}

// argv returns the job's command; threads is a count, "auto" or the
// {threads} placeholder; write sends a transcode's output to a file.
func (j *job) argv(threads string, write bool) []string {
	switch j.kind {
	case WorkloadTranscode:
		args := append([]string{j.exe}, workload.TranscodeArgs(j.clip, j.trans, threads)...)
		if write {
			args = append(args, "--write")
		}
		return args
	default:
		return append([]string{j.exe}, workload.SpinOpsArgs(j.spin, threads)...)
	}
}

// work is how much a finished job did: its frames (a transcode), else its
// ops (the spin kernel).
func work(j runner.JobResult) float64 {
	if j.Frames > 0 {
		return float64(j.Frames)
	}
	return float64(j.Ops)
}

// batchResult summarises one batch run by an experiment.
type batchResult struct {
	jobs    []runner.JobResult
	elapsed time.Duration
}

// runBatch runs n copies of argv, c at a time, k CPUs each in mode.
func runBatch(ctx context.Context, env *Env, argv []string, n, c int, k float64, mode runner.Mode, threads int) (batchResult, error) {
	placer, err := runner.NewAllocPlacer(env.Topo)
	if err != nil {
		return batchResult{}, err
	}
	r := &runner.Runner{Driver: env.Driver, Placer: placer, Pool: env.Topo.Allowed()}
	cmds := make([][]string, n)
	for i := range cmds {
		cmds[i] = argv
	}
	start := time.Now()
	res, err := r.Run(ctx, runner.Spec{Commands: cmds, Concurrency: c, CPUs: k, Mode: mode, Threads: threads})
	elapsed := time.Since(start)
	if err != nil {
		return batchResult{}, err
	}
	for _, j := range res {
		if j.ExitCode != 0 || j.Error != "" {
			return batchResult{}, fmt.Errorf("job %d (%s) failed: exit %d %s %s", j.Job, j.Cmd, j.ExitCode, j.Error, j.StderrTail)
		}
	}
	return batchResult{jobs: res, elapsed: elapsed}, nil
}

// walls returns the jobs' wall times.
func (b batchResult) walls() []float64 {
	out := make([]float64, len(b.jobs))
	for i, j := range b.jobs {
		out[i] = j.WallS
	}
	return out
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// pct renders a relative change as a signed percentage; a change that
// could not be computed (NaN: no baseline; Inf: a zero one) is "n/a",
// never "+NaN%".
func pct(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "n/a"
	}
	return fmt.Sprintf("%+.0f%%", 100*f)
}
