package workload

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"time"
)

// DefaultFFmpeg is the ffmpeg binary used when an option leaves it empty,
// looked up in $PATH.
const DefaultFFmpeg = "ffmpeg"

// InstallHint tells a person how to get an ffmpeg with libx264 on Debian
// and Ubuntu, where the ffmpeg package pulls in libx264.
const InstallHint = "apt-get install ffmpeg"

// ErrNoFFmpeg means ffmpeg is not installed or lacks the libx264 encoder.
var ErrNoFFmpeg = errors.New("ffmpeg with libx264 not found")

// CheckFFmpeg reports whether bin (default [DefaultFFmpeg]) runs and lists
// the libx264 encoder in `ffmpeg -hide_banner -encoders`. Its error wraps
// [ErrNoFFmpeg] and names [InstallHint].
func CheckFFmpeg(ctx context.Context, bin string) error {
	if bin == "" {
		bin = DefaultFFmpeg
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return fmt.Errorf("%w: %s is not installed (%s)", ErrNoFFmpeg, bin, InstallHint)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "-hide_banner", "-nostdin", "-encoders").Output()
	if err != nil {
		return fmt.Errorf("%w: running %s -encoders: %v (%s)", ErrNoFFmpeg, path, err, InstallHint)
	}
	if !hasEncoder(out, "libx264") {
		return fmt.Errorf("%w: %s has no libx264 encoder (%s)", ErrNoFFmpeg, path, InstallHint)
	}
	return nil
}

// hasEncoder reports whether `ffmpeg -encoders` output lists name, as the
// second field of a line (" V....D libx264  libx264 H.264 ...").
func hasEncoder(out []byte, name string) bool {
	for line := range bytes.Lines(out) {
		f := bytes.Fields(line)
		if len(f) >= 2 && string(f[1]) == name {
			return true
		}
	}
	return false
}

var ffmpegProbe = sync.OnceValue(func() error { return CheckFFmpeg(context.Background(), DefaultFFmpeg) })

// FFmpegAvailable reports, as a nil error, that the default ffmpeg in $PATH
// has libx264. The probe runs once per process and its answer is cached;
// use [CheckFFmpeg] for another binary or a fresh look.
func FFmpegAvailable() error { return ffmpegProbe() }
