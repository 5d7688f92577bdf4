package workload

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The testdata files are real output of ffmpeg 5.1.9 (Debian 12): stdout of
// -progress pipe:1 and the stderr beside it, for a finished 1080p encode
// with 2 threads, a 180p encode with 1 thread, an encode stopped by SIGINT
// after 48 frames, and a missing input file.

func readTestdata(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func TestParseProgressCaptured(t *testing.T) {
	for _, tc := range []struct {
		file    string
		want    Progress
		wantErr error
	}{
		{
			file: "progress-ffmpeg5.1.9-1080p-2threads.txt",
			want: Progress{Frame: 150, FPS: 17.27, OutTime: 4933333 * time.Microsecond, Speed: 0.568, End: true, Blocks: 14},
		},
		{
			file: "progress-ffmpeg5.1.9-180p-1thread.txt",
			want: Progress{Frame: 30, OutTime: 933333 * time.Microsecond, Speed: 10.7, End: true, Blocks: 2},
		},
		{
			file: "progress-ffmpeg5.1.9-1080p-interrupted.txt",
			want: Progress{Frame: 48, FPS: 1.97, OutTime: 1533333 * time.Microsecond, Speed: 0.0628, End: true, Blocks: 4},
		},
		{file: "progress-ffmpeg5.1.9-missing-input.txt", wantErr: ErrNoProgress},
	} {
		t.Run(tc.file, func(t *testing.T) {
			got, err := ParseProgress(bytes.NewReader(readTestdata(t, tc.file)))
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("ParseProgress error = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseProgress: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseProgress mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseProgressEdges(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		want    Progress
		wantErr bool
	}{
		{
			name: "unfinished block is ignored",
			in:   "frame=10\nprogress=continue\nframe=20\n",
			want: Progress{Frame: 10, Blocks: 1},
		},
		{
			name: "crlf and spaces",
			in:   "frame= 7 \r\nspeed= 1.5x\r\nprogress=end\r\n",
			want: Progress{Frame: 7, Speed: 1.5, End: true, Blocks: 1},
		},
		{
			name: "N/A and unknown keys and junk lines",
			in:   "bitrate=N/A\nspeed=N/A\nhello\nstream_0_0_q=28.0\nframe=3\nprogress=continue\n",
			want: Progress{Frame: 3, Blocks: 1},
		},
		{
			name: "negative out_time before first frame",
			in:   "frame=0\nout_time_us=-9223372036854775807\nprogress=continue\n",
			want: Progress{Blocks: 1},
		},
		{
			name: "later block wins",
			in:   "frame=1\nfps=2.5\nprogress=continue\nframe=2\nprogress=end\n",
			want: Progress{Frame: 2, FPS: 2.5, End: true, Blocks: 2},
		},
		{name: "empty", in: "", wantErr: true},
		{name: "no progress line", in: "frame=5\n", wantErr: true},
		{name: "bad frame", in: "frame=five\nprogress=end\n", wantErr: true},
		{name: "negative frame", in: "frame=-1\nprogress=end\n", wantErr: true},
		{name: "huge frame", in: "frame=99999999999999999999\nprogress=end\n", wantErr: true},
		{name: "bad speed", in: "speed=fastx\nprogress=end\n", wantErr: true},
		{name: "NaN fps", in: "fps=NaN\nprogress=end\n", wantErr: true},
		{name: "line too long", in: "x=" + strings.Repeat("a", maxProgressLine) + "\nprogress=end\n", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseProgress(strings.NewReader(tc.in))
			if tc.wantErr {
				if err == nil {
					t.Errorf("ParseProgress = %+v, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseProgress: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseProgress mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseStats(t *testing.T) {
	for _, tc := range []struct {
		name   string
		in     []byte
		want   int64
		wantOK bool
	}{
		{name: "1080p 2 threads", in: readTestdata(t, "stderr-ffmpeg5.1.9-1080p-2threads.txt"), want: 150, wantOK: true},
		{name: "180p 1 thread", in: readTestdata(t, "stderr-ffmpeg5.1.9-180p-1thread.txt"), want: 30, wantOK: true},
		{name: "interrupted", in: readTestdata(t, "stderr-ffmpeg5.1.9-1080p-interrupted.txt"), want: 48, wantOK: true},
		{name: "missing input", in: readTestdata(t, "stderr-ffmpeg5.1.9-missing-input.txt")},
		{name: "empty"},
		{name: "carriage returns only", in: []byte("frame=    1 fps=0.0\rframe=   31 fps=0.0\r"), want: 31, wantOK: true},
		{name: "no digits", in: []byte("frame= fps=0.0\n")},
		{name: "libx264 summary is not a stats line", in: []byte("frame=  9 fps=1\n[libx264 @ 0x1] frame I:1 Avg QP:20\n"), want: 9, wantOK: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ParseStats(tc.in)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("ParseStats = %d, %v, want %d, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

// FuzzParseProgress checks that ParseProgress never panics, never reports a
// negative count, and that a complete block appended to any input is what
// it reports. Seeds: the captured ffmpeg output in testdata, plus the corpus
// in testdata/fuzz/FuzzParseProgress.
func FuzzParseProgress(f *testing.F) {
	matches, err := filepath.Glob("testdata/progress-*.txt")
	if err != nil {
		f.Fatal(err)
	}
	for _, m := range matches {
		f.Add(readTestdata(f, filepath.Base(m)), int64(150))
	}
	f.Add([]byte("frame=1\nprogress=continue\nframe="), int64(0))
	f.Fuzz(func(t *testing.T, in []byte, n int64) {
		p, err := ParseProgress(bytes.NewReader(in))
		if err == nil && (p.Frame < 0 || p.Blocks < 1 || p.FPS < 0 || p.Speed < 0 || p.OutTime < 0) {
			t.Fatalf("ParseProgress(%q) = %+v: negative or blockless result", in, p)
		}
		if err != nil || n < 0 {
			return
		}
		more := append(append([]byte{}, in...), "\nframe="+strconv.FormatInt(n, 10)+"\nprogress=end\n"...)
		q, err := ParseProgress(bytes.NewReader(more))
		if err != nil {
			t.Fatalf("ParseProgress after a complete block: %v", err)
		}
		if q.Frame != n || !q.End || q.Blocks != p.Blocks+1 {
			t.Fatalf("ParseProgress after frame=%d, progress=end = %+v (before: %+v)", n, q, p)
		}
	})
}

// FuzzParseStats checks that ParseStats never panics or goes negative.
func FuzzParseStats(f *testing.F) {
	matches, err := filepath.Glob("testdata/stderr-*.txt")
	if err != nil {
		f.Fatal(err)
	}
	for _, m := range matches {
		f.Add(readTestdata(f, filepath.Base(m)))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if n, ok := ParseStats(in); n < 0 || (!ok && n != 0) {
			t.Fatalf("ParseStats(%q) = %d, %v", in, n, ok)
		}
	})
}
