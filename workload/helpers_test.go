package workload

import (
	"os"
	"testing"
)

// replace sets *p to v for the duration of the test.
func replace[T any](tb testing.TB, p *T, v T) {
	tb.Helper()
	old := *p
	*p = v
	tb.Cleanup(func() { *p = old })
}

func unsetenv(k string) error { return os.Unsetenv(k) }

// requireFFmpeg skips tests that need a real ffmpeg with libx264.
func requireFFmpeg(tb testing.TB) {
	tb.Helper()
	if err := FFmpegAvailable(); err != nil {
		tb.Skipf("skipping: needs ffmpeg with libx264 (%s): %v", InstallHint, err)
	}
}
