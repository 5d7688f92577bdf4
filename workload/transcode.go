package workload

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Transcode defaults: the seeds' x264 settings. The seeds left the preset at
// x264's default, medium.
const (
	DefaultCRF    = 22
	DefaultPreset = "medium"
)

// TranscodeOptions configures one encode of a clip made by [Clip].
type TranscodeOptions struct {
	Clip    string // input file; required
	Threads int    // -threads for decoder and encoder; 0 leaves both at ffmpeg's auto
	CRF     int    // x264 constant rate factor, default [DefaultCRF]; 0 is not lossless here, use a negative value for crf 0
	Preset  string // x264 preset, default [DefaultPreset]
	Output  string // file to write; "" discards the output (-f null -)
	// WriteTemp, when Output is "", writes the encode to a temporary file
	// removed after, so the measure includes writing it.
	WriteTemp bool
	FFmpeg    string // binary, default [DefaultFFmpeg]
}

// defaults fills the zero fields.
func (o TranscodeOptions) defaults() TranscodeOptions {
	o.Preset = cmpOr(o.Preset, DefaultPreset)
	o.FFmpeg = cmpOr(o.FFmpeg, DefaultFFmpeg)
	switch {
	case o.CRF == 0:
		o.CRF = DefaultCRF
	case o.CRF < 0:
		o.CRF = 0
	}
	return o
}

// resolve fills the defaults and checks.
func (o TranscodeOptions) resolve() (TranscodeOptions, error) {
	o = o.defaults()
	switch {
	case o.Clip == "":
		return o, fmt.Errorf("%w: transcode needs a clip", ErrInvalid)
	case o.Threads < 0:
		return o, fmt.Errorf("%w: transcode threads %d: want >= 1, or 0 for ffmpeg's auto", ErrInvalid, o.Threads)
	case o.CRF > 51:
		return o, fmt.Errorf("%w: crf %d: want 0-51", ErrInvalid, o.CRF)
	case strings.HasPrefix(o.Preset, "-"):
		return o, fmt.Errorf("%w: preset %q", ErrInvalid, o.Preset)
	}
	return o, nil
}

// TranscodeResult is what one [Transcode] did.
type TranscodeResult struct {
	Frames  int64         // frames encoded
	Wall    time.Duration // ffmpeg's run, start to exit
	FPS     float64       // Frames / Wall
	Threads int
	User    time.Duration // ffmpeg's user CPU time
	Sys     time.Duration // ffmpeg's system CPU time
}

// TranscodeCommand returns the ffmpeg command line for opts, argv[0] first:
//
//	ffmpeg -hide_banner -nostdin -threads N -i CLIP -map 0:v:0 -an
//	  -c:v libx264 -preset medium -crf 22 -threads N -f null - -progress pipe:1
//
// -threads appears twice so that N bounds the decoder as well as the encoder
// (the seeds' encoder-only -threads left the decoder at "auto"). Progress
// reports go to stdout (see [ParseProgress]); the final stats line goes to
// stderr (see [ParseStats]). It returns nil if opts are invalid.
func TranscodeCommand(opts TranscodeOptions) []string {
	o, err := opts.resolve()
	if err != nil {
		return nil
	}
	return transcodeArgv(o)
}

func transcodeArgv(o TranscodeOptions) []string {
	var threads []string // none: ffmpeg's auto for decoder and encoder
	if o.Threads > 0 {
		threads = []string{"-threads", strconv.Itoa(o.Threads)}
	}
	argv := []string{o.FFmpeg, "-hide_banner", "-nostdin"}
	argv = append(argv, threads...)
	argv = append(argv, "-i", o.Clip, "-map", "0:v:0", "-an",
		"-c:v", "libx264", "-preset", o.Preset, "-crf", strconv.Itoa(o.CRF))
	argv = append(argv, threads...)
	if o.Output == "" {
		argv = append(argv, "-f", "null", "-")
	} else {
		argv = append(argv, "-y", o.Output)
	}
	return append(argv, "-progress", "pipe:1")
}

// Transcode encodes opts.Clip with ffmpeg and libx264 and counts the frames,
// from the progress report or, failing that, the final stats line. The wall
// time covers ffmpeg's whole run (start-up, decode, encode); it does not
// include making the clip. Ending ctx stops ffmpeg.
func Transcode(ctx context.Context, opts TranscodeOptions) (TranscodeResult, error) {
	o, err := opts.resolve()
	if err != nil {
		return TranscodeResult{}, err
	}
	if o.WriteTemp && o.Output == "" {
		f, err := os.CreateTemp("", "corepin-transcode-*.mkv")
		if err != nil {
			return TranscodeResult{}, fmt.Errorf("creating the output file: %w", err)
		}
		f.Close()
		defer os.Remove(f.Name())
		o.Output = f.Name()
	}
	argv := transcodeArgv(o)
	if _, err := exec.LookPath(argv[0]); err != nil {
		return TranscodeResult{}, fmt.Errorf("%w: %s is not installed (%s)", ErrNoFFmpeg, argv[0], InstallHint)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var stdout bytes.Buffer
	var stderr tailBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	runErr := cmd.Run()
	wall := time.Since(start)
	if runErr != nil {
		if ctx.Err() != nil {
			return TranscodeResult{}, fmt.Errorf("transcoding: %w", context.Cause(ctx))
		}
		if last := stderr.lastLine(); last != "" {
			return TranscodeResult{}, fmt.Errorf("transcoding %s: %w: %s", o.Clip, runErr, last)
		}
		return TranscodeResult{}, fmt.Errorf("transcoding %s: %w", o.Clip, runErr)
	}
	res := TranscodeResult{Wall: wall, Threads: o.Threads}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		res.User = time.Duration(ru.Utime.Nano())
		res.Sys = time.Duration(ru.Stime.Nano())
	}
	p, perr := ParseProgress(&stdout)
	switch {
	case perr == nil && p.End:
		res.Frames = p.Frame
	default:
		n, ok := ParseStats(stderr.Bytes())
		if !ok {
			return res, fmt.Errorf("counting frames: %w", errors.Join(perr, errors.New("no stats line either")))
		}
		res.Frames = n
	}
	if wall > 0 {
		res.FPS = float64(res.Frames) / wall.Seconds()
	}
	return res, nil
}

// tailBuffer keeps the last tailMax bytes written to it: enough for ffmpeg's
// last stats line and error message, bounded however long ffmpeg runs.
type tailBuffer struct{ b []byte }

const tailMax = 64 << 10

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 2*tailMax {
		t.b = append(t.b[:0], t.b[len(t.b)-tailMax:]...)
	}
	return len(p), nil
}

// Bytes returns the kept tail.
func (t *tailBuffer) Bytes() []byte {
	if len(t.b) > tailMax {
		return t.b[len(t.b)-tailMax:]
	}
	return t.b
}

// lastLine returns the last non-empty line, with \r as a line end too.
func (t *tailBuffer) lastLine() string {
	lines := strings.FieldsFunc(string(t.Bytes()), func(r rune) bool { return r == '\n' || r == '\r' })
	for i := len(lines) - 1; i >= 0; i-- {
		if s := strings.TrimSpace(lines[i]); s != "" {
			return s
		}
	}
	return ""
}
