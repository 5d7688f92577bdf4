package workload

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// tinyClip is a clip small enough to make and encode in about a second.
func tinyClip(dir string) ClipOptions {
	return ClipOptions{Dir: dir, Seconds: 1, Width: 320, Height: 180, FPS: 30}
}

func TestTranscodeCommand(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts TranscodeOptions
		want []string
	}{
		{
			name: "defaults discard the output",
			opts: TranscodeOptions{Clip: "in.mkv", Threads: 2},
			want: []string{"ffmpeg", "-hide_banner", "-nostdin", "-threads", "2", "-i", "in.mkv", "-map", "0:v:0", "-an",
				"-c:v", "libx264", "-preset", "medium", "-crf", "22", "-threads", "2", "-f", "null", "-", "-progress", "pipe:1"},
		},
		{
			name: "file output, crf 0, other binary",
			opts: TranscodeOptions{Clip: "in.mkv", Threads: 1, CRF: -1, Preset: "veryfast", Output: "/tmp/o.mkv", FFmpeg: "/opt/ffmpeg"},
			want: []string{"/opt/ffmpeg", "-hide_banner", "-nostdin", "-threads", "1", "-i", "in.mkv", "-map", "0:v:0", "-an",
				"-c:v", "libx264", "-preset", "veryfast", "-crf", "0", "-threads", "1", "-y", "/tmp/o.mkv", "-progress", "pipe:1"},
		},
		{name: "no clip", opts: TranscodeOptions{Threads: 1}},
		{name: "native threads leave ffmpeg at its auto", opts: TranscodeOptions{Clip: "in.mkv"}, want: []string{
			"ffmpeg", "-hide_banner", "-nostdin", "-i", "in.mkv", "-map", "0:v:0", "-an",
			"-c:v", "libx264", "-preset", "medium", "-crf", "22", "-f", "null", "-", "-progress", "pipe:1"}},
		{name: "negative threads", opts: TranscodeOptions{Clip: "in.mkv", Threads: -1}},
		{name: "crf too high", opts: TranscodeOptions{Clip: "in.mkv", Threads: 1, CRF: 52}},
		{name: "preset like a flag", opts: TranscodeOptions{Clip: "in.mkv", Threads: 1, Preset: "-y"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, TranscodeCommand(tc.opts)); diff != "" {
				t.Errorf("TranscodeCommand mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestClipCommandAndPath(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", "/cache")
	got, err := ClipCommand(ClipOptions{}, "out.tmp")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"ffmpeg", "-hide_banner", "-nostdin", "-nostats", "-loglevel", "error", "-y",
		"-f", "lavfi", "-i", "testsrc2=size=1920x1080:rate=30", "-frames:v", "150", "-pix_fmt", "yuv420p",
		"-c:v", "libx264", "-preset", "ultrafast", "-qp", "0", "-f", "matroska", "out.tmp"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ClipCommand mismatch (-want +got):\n%s", diff)
	}
	path, err := ClipPath(ClipOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "/cache/corepin/testsrc2-1920x1080-30fps-5s-x264lossless.mkv"; path != want {
		t.Errorf("ClipPath = %q, want %q", path, want)
	}
	if n := (ClipOptions{}).Frames(); n != 150 {
		t.Errorf("Frames() = %d, want 150", n)
	}
	for _, bad := range []ClipOptions{{Width: 321}, {Height: -2}, {Seconds: -1}, {FPS: -30}} {
		if _, err := ClipPath(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("ClipPath(%+v) error = %v, want ErrInvalid", bad, err)
		}
	}
}

func TestHasEncoder(t *testing.T) {
	out := []byte("Encoders:\n V..... = Video\n ------\n V....D libx264              libx264 H.264\n V....D libx264rgb           libx264 RGB\n")
	if !hasEncoder(out, "libx264") {
		t.Error("hasEncoder(libx264) = false, want true")
	}
	if hasEncoder(out, "libx265") || hasEncoder([]byte(" V....D libx264rgb libx264 RGB\n"), "libx264") {
		t.Error("hasEncoder matched an encoder that is not listed")
	}
}

// fakeFFmpeg writes a shell script that prints encoders without libx264.
func fakeFFmpeg(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ffmpeg")
	script := "#!/bin/sh\necho ' V....D mpeg4                MPEG-4 part 2'\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestNoFFmpeg(t *testing.T) {
	ctx := context.Background()
	missing := filepath.Join(t.TempDir(), "no-such-ffmpeg")
	for _, tc := range []struct {
		name string
		bin  string
		want string
	}{
		{name: "not installed", bin: missing, want: "is not installed"},
		{name: "no libx264", bin: fakeFFmpeg(t), want: "has no libx264"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckFFmpeg(ctx, tc.bin)
			if !errors.Is(err, ErrNoFFmpeg) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), InstallHint) {
				t.Errorf("CheckFFmpeg(%s) = %v, want ErrNoFFmpeg saying %q and %q", tc.bin, err, tc.want, InstallHint)
			}
			if _, err := Clip(ctx, ClipOptions{Dir: t.TempDir(), FFmpeg: tc.bin}); !errors.Is(err, ErrNoFFmpeg) {
				t.Errorf("Clip with %s: error = %v, want ErrNoFFmpeg", tc.bin, err)
			}
		})
	}
	if _, err := Transcode(ctx, TranscodeOptions{Clip: "x.mkv", Threads: 1, FFmpeg: missing}); !errors.Is(err, ErrNoFFmpeg) {
		t.Errorf("Transcode with a missing ffmpeg: error = %v, want ErrNoFFmpeg", err)
	}
}

func TestTranscode(t *testing.T) {
	requireFFmpeg(t)
	ctx := context.Background()
	copts := tinyClip(t.TempDir())
	clip, err := Clip(ctx, copts)
	if err != nil {
		t.Fatalf("Clip: %v", err)
	}
	want := int64(copts.Frames())
	t.Run("discard", func(t *testing.T) {
		res, err := Transcode(ctx, TranscodeOptions{Clip: clip, Threads: 1})
		if err != nil {
			t.Fatalf("Transcode: %v", err)
		}
		if res.Frames != want || res.Threads != 1 {
			t.Errorf("Transcode = %+v, want %d frames with 1 thread", res, want)
		}
		if res.Wall <= 0 || res.FPS != float64(res.Frames)/res.Wall.Seconds() {
			t.Errorf("Transcode FPS = %v, Wall = %v: want FPS = Frames/Wall", res.FPS, res.Wall)
		}
	})
	t.Run("write to a temporary file", func(t *testing.T) {
		tmp := t.TempDir()
		t.Setenv("TMPDIR", tmp)
		spy, written := writeSpy(t, tmp)
		res, err := Transcode(ctx, TranscodeOptions{Clip: clip, Threads: 1, Preset: "ultrafast", WriteTemp: true, FFmpeg: spy})
		if err != nil || res.Frames != want {
			t.Fatalf("Transcode = %+v, %v; want %d frames", res, err, want)
		}
		if left, _ := os.ReadDir(tmp); len(left) != 0 || written() == 0 {
			t.Errorf("the temporary output: %d bytes written, %d files left in TMPDIR; want some bytes and none left", written(), len(left))
		}
	})
	t.Run("write", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "out.mkv")
		res, err := Transcode(ctx, TranscodeOptions{Clip: clip, Threads: 2, Preset: "ultrafast", Output: out})
		if err != nil {
			t.Fatalf("Transcode: %v", err)
		}
		if res.Frames != want {
			t.Errorf("Frames = %d, want %d", res.Frames, want)
		}
		if st, err := os.Stat(out); err != nil || st.Size() == 0 {
			t.Errorf("output %s: %v, want a non-empty file", out, err)
		}
	})
	t.Run("bad input", func(t *testing.T) {
		_, err := Transcode(ctx, TranscodeOptions{Clip: filepath.Join(t.TempDir(), "none.mkv"), Threads: 1})
		if err == nil || !strings.Contains(err.Error(), "No such file") {
			t.Errorf("Transcode of a missing clip: error = %v, want ffmpeg's reason", err)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := Transcode(cctx, TranscodeOptions{Clip: clip, Threads: 1}); !errors.Is(err, context.Canceled) {
			t.Errorf("Transcode with a cancelled context: error = %v, want context.Canceled", err)
		}
	})
}

func TestClipConcurrent(t *testing.T) {
	requireFFmpeg(t)
	var generated atomic.Int32
	copts := tinyClip(t.TempDir())
	copts.Generating = func(string) { generated.Add(1) }
	const callers = 3
	paths := make([]string, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range callers {
		wg.Go(func() {
			<-start
			paths[i], errs[i] = Clip(context.Background(), copts)
		})
	}
	close(start)
	wg.Wait()
	if _, err := Clip(context.Background(), copts); err != nil {
		t.Fatal(err)
	}
	if n := generated.Load(); n != 1 {
		t.Errorf("%d callers and one after them generated the clip %d times, want once", callers, n)
	}
	want, err := ClipPath(copts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range callers {
		if errs[i] != nil || paths[i] != want {
			t.Errorf("caller %d: Clip = %q, %v, want %q", i, paths[i], errs[i], want)
		}
	}
	// Complete: ffmpeg decodes every frame of it.
	res, err := Transcode(context.Background(), TranscodeOptions{Clip: want, Threads: 1, Preset: "ultrafast"})
	if err != nil || res.Frames != int64(copts.Frames()) {
		t.Errorf("Transcode of the shared clip = %d frames, %v, want %d", res.Frames, err, copts.Frames())
	}
	entries, err := os.ReadDir(copts.Dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
	// A second round finds the cache and generates nothing.
	if _, err := Clip(context.Background(), copts); err != nil || generated.Load() != 1 {
		t.Errorf("cached Clip: err = %v, generations = %d, want 1", err, generated.Load())
	}
}

func TestClipRemovesStaleTemp(t *testing.T) {
	requireFFmpeg(t)
	copts := tinyClip(t.TempDir())
	path, err := ClipPath(copts)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(copts.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	stale := path + ".tmp-123"
	if err := os.WriteFile(stale, []byte("half a clip"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Clip(context.Background(), copts); err != nil {
		t.Fatalf("Clip: %v", err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale %s: Stat error = %v, want it removed", stale, err)
	}
}

func TestClipWaitsForLock(t *testing.T) {
	copts := tinyClip(t.TempDir())
	path, err := ClipPath(copts)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(copts.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	unlock, err := lockFile(context.Background(), path+".lock")
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Clip(ctx, copts); !errors.Is(err, context.Canceled) {
		t.Errorf("Clip while another holds the lock, cancelled: error = %v, want context.Canceled", err)
	}
}

// envHelperClipDir makes the test binary act as one clip-making job.
const envHelperClipDir = "COREPIN_TEST_HELPER_CLIP_DIR"

// TestHelperClip is not a test: TestClipConcurrentProcesses runs the test
// binary with only this test selected to act as a separate job process.
func TestHelperClip(t *testing.T) {
	dir := os.Getenv(envHelperClipDir)
	if dir == "" {
		t.Skip("helper process for TestClipConcurrentProcesses")
	}
	copts := tinyClip(dir)
	copts.Generating = func(string) { os.Stdout.WriteString("generated\n") }
	if _, err := Clip(context.Background(), copts); err != nil {
		t.Fatal(err)
	}
}

func TestClipConcurrentProcesses(t *testing.T) {
	requireFFmpeg(t)
	dir := t.TempDir()
	const jobs = 3
	cmds := make([]*exec.Cmd, jobs)
	outs := make([]bytes.Buffer, jobs)
	for i := range cmds {
		cmds[i] = exec.Command(os.Args[0], "-test.run=^TestHelperClip$", "-test.count=1")
		cmds[i].Env = append(os.Environ(), envHelperClipDir+"="+dir)
		cmds[i].Stdout, cmds[i].Stderr = &outs[i], &outs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	generated := 0
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Errorf("job %d: %v\n%s", i, err, outs[i].String())
		}
		generated += strings.Count(outs[i].String(), "generated\n")
	}
	if generated != 1 {
		t.Errorf("%d job processes generated the clip %d times, want once", jobs, generated)
	}
}

// writeSpy is an ffmpeg that runs the real one, then notes the size of the
// encode it wrote into tmp (corepin-transcode-*), for written to report
// after the caller has removed it.
func writeSpy(t *testing.T, tmp string) (bin string, written func() int64) {
	t.Helper()
	real, err := exec.LookPath(DefaultFFmpeg)
	if err != nil {
		t.Skip("ffmpeg not installed")
	}
	dir := t.TempDir()
	note := filepath.Join(dir, "size")
	bin = filepath.Join(dir, "ffmpeg")
	script := fmt.Sprintf("#!/bin/sh\n%q \"$@\"\nrc=$?\ncat %q/corepin-transcode-* | wc -c > %q\nexit $rc\n", real, tmp, note)
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, func() int64 {
		b, _ := os.ReadFile(note)
		n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return n
	}
}
