package workload

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Workload names, as in `corepin workload NAME` and the reports' "workload".
const (
	NameTranscode = "transcode"
	NameSpin      = "spin"
)

// TranscodeReport is the JSON object `corepin workload transcode -o json`
// prints.
type TranscodeReport struct {
	Workload string  `json:"workload"` // "transcode"
	Frames   int64   `json:"frames"`
	WallS    float64 `json:"wall_s"`
	FPS      float64 `json:"fps"`
	Threads  int     `json:"threads"`
	UserS    float64 `json:"user_s"`
	SysS     float64 `json:"sys_s"`
	CRF      int     `json:"crf"`
	Preset   string  `json:"preset"`
	Width    int     `json:"width"`
	Height   int     `json:"height"`
	ClipFPS  int     `json:"clip_fps"`
	ClipS    int     `json:"clip_s"`
	Clip     string  `json:"clip"`
}

// SpinReport is the JSON object `corepin workload spin -o json` prints.
type SpinReport struct {
	Workload  string  `json:"workload"` // "spin"
	Ops       int64   `json:"ops"`
	OpsPerS   float64 `json:"ops_per_s"`
	Threads   int     `json:"threads"`
	WallS     float64 `json:"wall_s"`
	Seconds   float64 `json:"seconds"`    // asked-for duration, 0 with target_ops
	TargetOps int64   `json:"target_ops"` // asked-for ops, 0 with seconds
	PerThread []int64 `json:"per_thread"` // ops of each thread
}

// NewTranscodeReport describes res of an encode of the clip c with options t.
func NewTranscodeReport(res TranscodeResult, c ClipOptions, t TranscodeOptions, clip string) TranscodeReport {
	c, t = c.defaults(), t.defaults()
	return TranscodeReport{
		Workload: NameTranscode, Frames: res.Frames, WallS: secs(res.Wall), FPS: round3(res.FPS),
		Threads: res.Threads, UserS: secs(res.User), SysS: secs(res.Sys), CRF: t.CRF, Preset: t.Preset,
		Width: c.Width, Height: c.Height, ClipFPS: c.FPS, ClipS: c.Seconds, Clip: clip,
	}
}

// NewSpinReport describes res of a spin run with opts.
func NewSpinReport(res SpinResult, opts SpinOptions) SpinReport {
	return SpinReport{
		Workload: NameSpin, Ops: res.Ops, OpsPerS: round3(res.OpsPerSec), Threads: res.Threads,
		WallS: secs(res.Wall), Seconds: opts.Duration.Seconds(), TargetOps: opts.Ops, PerThread: res.PerThread,
	}
}

// String is the one human line hyperfine would print.
func (r TranscodeReport) String() string {
	return fmt.Sprintf("transcode: %d frames in %.2f s = %.1f fps (threads %d, %dx%d, crf %d, %s)",
		r.Frames, r.WallS, r.FPS, r.Threads, r.Width, r.Height, r.CRF, r.Preset)
}

// String is the one human line hyperfine would print.
func (r SpinReport) String() string {
	return fmt.Sprintf("spin: %d ops in %.2f s = %.0f ops/s (threads %d)", r.Ops, r.WallS, r.OpsPerS, r.Threads)
}

// Report is a parsed workload report: exactly one of its pointers is set,
// the one Workload names.
type Report struct {
	Workload  string
	Transcode *TranscodeReport
	Spin      *SpinReport
}

// ParseReport reads the JSON object a `corepin workload ... -o json` run
// printed. Surrounding blank space is allowed; anything else is an error.
func ParseReport(data []byte) (Report, error) {
	data = bytes.TrimSpace(data)
	var head struct {
		Workload string `json:"workload"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return Report{}, fmt.Errorf("parsing workload report: %w", err)
	}
	r := Report{Workload: head.Workload}
	var err error
	switch head.Workload {
	case NameTranscode:
		r.Transcode = new(TranscodeReport)
		err = json.Unmarshal(data, r.Transcode)
	case NameSpin:
		r.Spin = new(SpinReport)
		err = json.Unmarshal(data, r.Spin)
	default:
		return Report{}, fmt.Errorf("parsing workload report: unknown workload %q", head.Workload)
	}
	if err != nil {
		return Report{}, fmt.Errorf("parsing %s report: %w", head.Workload, err)
	}
	return r, nil
}

// SpinArgs returns the corepin arguments (after the binary's name) that run
// the spin kernel for d with threads ("auto", a count, or a placeholder such
// as "{threads}" for `corepin run`) and print a JSON report.
func SpinArgs(d time.Duration, threads string) []string { return SpinNiceArgs(d, threads, 0) }

// SpinNiceArgs is [SpinArgs] with every spinning thread at nice (0: not
// set).
func SpinNiceArgs(d time.Duration, threads string, nice int) []string {
	if nice != 0 {
		return []string{"workload", NameSpin, "--seconds", strconv.FormatFloat(d.Seconds(), 'f', -1, 64),
			"--threads", threads, "--nice", strconv.Itoa(nice), "-o", "json"}
	}
	return []string{"workload", NameSpin, "--seconds", strconv.FormatFloat(d.Seconds(), 'f', -1, 64),
		"--threads", threads, "-o", "json"}
}

// TranscodeArgs returns the corepin arguments (after the binary's name) that
// run the transcode of clip c with options t (its Clip, Threads and Output
// are ignored) and print a JSON report; threads is as for [SpinArgs].
func TranscodeArgs(c ClipOptions, t TranscodeOptions, threads string) []string {
	args := []string{"workload", NameTranscode, "--threads", threads}
	if c.Dir != "" {
		args = append(args, "--cache-dir", c.Dir)
	}
	if c.Seconds != 0 {
		args = append(args, "--seconds", strconv.Itoa(c.Seconds))
	}
	if c.Width != 0 || c.Height != 0 {
		args = append(args, "--size", fmt.Sprintf("%dx%d", cmpOr(c.Width, DefaultWidth), cmpOr(c.Height, DefaultHeight)))
	}
	if c.FPS != 0 {
		args = append(args, "--fps", strconv.Itoa(c.FPS))
	}
	if t.CRF != 0 {
		args = append(args, "--crf", strconv.Itoa(max(t.CRF, 0)))
	}
	if t.Preset != "" {
		args = append(args, "--preset", t.Preset)
	}
	if c.FFmpeg != "" || t.FFmpeg != "" {
		args = append(args, "--ffmpeg", cmpOr(t.FFmpeg, c.FFmpeg))
	}
	return append(args, "-o", "json")
}

func secs(d time.Duration) float64 { return round3(d.Seconds()) }

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }
