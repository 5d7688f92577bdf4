package workload

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// Clip defaults: the seeds' 1080p at 30 frames/s. Five seconds (150 frames)
// makes one 2-thread encode take 5-15 s on a small 2-core VM.
const (
	DefaultClipSeconds = 5
	QuickClipSeconds   = 2
	DefaultWidth       = 1920
	DefaultHeight      = 1080
	DefaultFPS         = 30
)

// ClipOptions describes the generated input clip. Zero fields take the
// defaults above; Dir defaults to [DefaultCacheDir].
type ClipOptions struct {
	Dir     string // cache directory
	Seconds int    // length; the clip has exactly Seconds*FPS frames
	Width   int
	Height  int
	FPS     int
	FFmpeg  string // binary, default [DefaultFFmpeg]
	// Generating, when set, is called with the clip's path when Clip is
	// about to generate it (it is not cached yet, and nobody else is
	// making it): minutes at 1080p, worth telling a person.
	Generating func(path string)
}

// defaults fills the zero fields, all but Dir, which needs a lookup.
func (o ClipOptions) defaults() ClipOptions {
	o.Seconds = cmpOr(o.Seconds, DefaultClipSeconds)
	o.Width = cmpOr(o.Width, DefaultWidth)
	o.Height = cmpOr(o.Height, DefaultHeight)
	o.FPS = cmpOr(o.FPS, DefaultFPS)
	o.FFmpeg = cmpOr(o.FFmpeg, DefaultFFmpeg)
	return o
}

// resolve fills the defaults, the cache directory included, and checks.
func (o ClipOptions) resolve() (ClipOptions, error) {
	o = o.defaults()
	switch {
	case o.Seconds < 0, o.FPS < 0:
		return o, fmt.Errorf("%w: clip of %d s at %d fps", ErrInvalid, o.Seconds, o.FPS)
	case o.Width < 2, o.Height < 2, o.Width%2 != 0, o.Height%2 != 0:
		// yuv420p needs even sizes.
		return o, fmt.Errorf("%w: clip size %dx%d: want positive even numbers", ErrInvalid, o.Width, o.Height)
	}
	if o.Dir == "" {
		d, err := DefaultCacheDir()
		if err != nil {
			return o, err
		}
		o.Dir = d
	}
	return o, nil
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Frames is the clip's exact frame count, Seconds*FPS after defaults.
func (o ClipOptions) Frames() int {
	o = o.defaults()
	return o.Seconds * o.FPS
}

// DefaultCacheDir is $XDG_CACHE_HOME/corepin, or ~/.cache/corepin, as
// os.UserCacheDir finds it.
func DefaultCacheDir() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("finding the cache directory: %w", err)
	}
	return filepath.Join(d, "corepin"), nil
}

// ClipPath returns where [Clip] keeps the clip for opts, without creating it.
// The name carries every parameter, so clips of different shapes coexist.
func ClipPath(opts ClipOptions) (string, error) {
	o, err := opts.resolve()
	if err != nil {
		return "", err
	}
	name := fmt.Sprintf("testsrc2-%dx%d-%dfps-%ds-x264lossless.mkv", o.Width, o.Height, o.FPS, o.Seconds)
	return filepath.Join(o.Dir, name), nil
}

// ClipCommand returns the ffmpeg command line that writes the clip for opts
// to out: ffmpeg's testsrc2 pattern, yuv420p, exactly Seconds*FPS frames,
// compressed losslessly with libx264 (ultrafast, qp 0) in Matroska, so the
// cached file is small and decoding it costs a fraction of the encode.
func ClipCommand(opts ClipOptions, out string) ([]string, error) {
	o, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	src := fmt.Sprintf("testsrc2=size=%dx%d:rate=%d", o.Width, o.Height, o.FPS)
	return []string{
		o.FFmpeg, "-hide_banner", "-nostdin", "-nostats", "-loglevel", "error", "-y",
		"-f", "lavfi", "-i", src,
		"-frames:v", strconv.Itoa(o.Seconds * o.FPS), "-pix_fmt", "yuv420p",
		"-c:v", "libx264", "-preset", "ultrafast", "-qp", "0",
		"-f", "matroska", out,
	}, nil
}

// Clip returns the path of the cached clip for opts, generating it first if
// it is not there yet. Concurrent callers, in this process or others, are
// serialised by an flock(2) on a lock file beside the clip, so the clip is
// generated once; it is written to a temporary name and renamed into place,
// so a caller never sees a half-written clip. Leftover temporary files of a
// generator that died are removed under the lock.
func Clip(ctx context.Context, opts ClipOptions) (string, error) {
	o, err := opts.resolve()
	if err != nil {
		return "", err
	}
	path, err := ClipPath(o)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return "", fmt.Errorf("creating the clip cache: %w", err)
	}
	unlock, err := lockFile(ctx, path+".lock")
	if err != nil {
		return "", err
	}
	defer unlock()
	// Someone else may have generated it while we waited.
	if _, err := os.Stat(path); err == nil {
		return path, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("checking the cached clip: %w", err)
	}
	if err := CheckFFmpeg(ctx, o.FFmpeg); err != nil {
		return "", err
	}
	stale, err := filepath.Glob(globEscape(path) + ".tmp-*")
	if err != nil {
		return "", fmt.Errorf("finding stale clips: %w", err)
	}
	for _, s := range stale {
		os.Remove(s) // a dead generator's; if it stays, it only wastes space
	}
	if o.Generating != nil {
		o.Generating(path)
	}
	tmp, err := os.CreateTemp(o.Dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return "", fmt.Errorf("creating the clip: %w", err)
	}
	tmpName := tmp.Name()
	// CreateTemp makes 0600; the clip is as shareable as the directory.
	err = errors.Join(tmp.Chmod(0o644), tmp.Close())
	if err != nil {
		os.Remove(tmpName)
		return "", fmt.Errorf("creating the clip: %w", err)
	}
	defer os.Remove(tmpName) // no-op once renamed
	argv, err := ClipCommand(o, tmpName)
	if err != nil {
		return "", err
	}
	if err := runQuiet(ctx, argv); err != nil {
		return "", fmt.Errorf("generating the clip: %w", err)
	}
	if err := os.Rename(tmpName, path); err != nil {
		return "", fmt.Errorf("caching the clip: %w", err)
	}
	return path, nil
}

// lockFile takes an exclusive flock(2) on name, polling so that ctx can end
// the wait. The lock lives as long as the open file description: two opens
// in one process exclude each other just as two processes do.
func lockFile(ctx context.Context, name string) (unlock func(), err error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the clip lock: %w", err)
	}
	wait := 10 * time.Millisecond
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil // closing releases the lock
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", name, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for the clip lock: %w", context.Cause(ctx))
		case <-time.After(wait):
		}
		wait = min(2*wait, 250*time.Millisecond)
	}
}

// runQuiet runs argv, and on failure returns the exit error with the last
// line ffmpeg wrote to stderr.
func runQuiet(ctx context.Context, argv []string) error {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var stderr tailBuffer
	cmd.Stderr = &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if last := stderr.lastLine(); last != "" {
			return fmt.Errorf("%w: %s", err, last)
		}
		return err
	}
	return nil
}

// globEscape quotes the metacharacters of filepath.Match in s.
func globEscape(s string) string {
	var b []byte
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', '\\':
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return string(b)
}
