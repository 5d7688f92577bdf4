package workload

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestReportRoundTrip(t *testing.T) {
	tr := NewTranscodeReport(
		TranscodeResult{Frames: 150, Wall: 6210 * time.Millisecond, FPS: 150 / 6.21, Threads: 2, User: 11 * time.Second},
		ClipOptions{Dir: "/c"}, TranscodeOptions{Clip: "/c/x.mkv", Threads: 2}, "/c/x.mkv")
	sr := NewSpinReport(SpinResult{Ops: 10, OpsPerSec: 50, Threads: 2, Wall: 200 * time.Millisecond, PerThread: []int64{4, 6}}, SpinOptions{Duration: 200 * time.Millisecond})
	if got, want := tr.String(), "transcode: 150 frames in 6.21 s = 24.2 fps (threads 2, 1920x1080, crf 22, medium)"; got != want {
		t.Errorf("TranscodeReport.String() = %q, want %q", got, want)
	}
	if got, want := sr.String(), "spin: 10 ops in 0.20 s = 50 ops/s (threads 2)"; got != want {
		t.Errorf("SpinReport.String() = %q, want %q", got, want)
	}
	for _, tc := range []struct {
		name string
		v    any
		want Report
	}{
		{name: "transcode", v: tr, want: Report{Workload: NameTranscode, Transcode: &tr}},
		{name: "spin", v: sr, want: Report{Workload: NameSpin, Spin: &sr}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.MarshalIndent(tc.v, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseReport(append(b, '\n'))
			if err != nil {
				t.Fatalf("ParseReport: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseReport mismatch (-want +got):\n%s", diff)
			}
		})
	}
	for _, bad := range []string{"", "{}", `{"workload":"nope"}`, `{"workload":"spin","ops":"many"}`, `{"workload":"spin"} {}`} {
		if r, err := ParseReport([]byte(bad)); err == nil {
			t.Errorf("ParseReport(%q) = %+v, want an error", bad, r)
		}
	}
}

func TestReportJSONKeys(t *testing.T) {
	b, err := json.Marshal(NewTranscodeReport(TranscodeResult{Frames: 1, Threads: 1}, ClipOptions{}, TranscodeOptions{}, "c"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"workload", "frames", "wall_s", "fps", "threads"} {
		if _, ok := m[k]; !ok {
			t.Errorf("transcode report %s lacks %q", b, k)
		}
	}
}

func TestArgs(t *testing.T) {
	if diff := cmp.Diff([]string{"workload", "spin", "--seconds", "0.5", "--threads", "{threads}", "-o", "json"},
		SpinArgs(500*time.Millisecond, "{threads}")); diff != "" {
		t.Errorf("SpinArgs mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"workload", "spin", "--ops", "1000", "--threads", "2", "-o", "json"},
		SpinOpsArgs(1000, "2")); diff != "" {
		t.Errorf("SpinOpsArgs mismatch (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		name string
		c    ClipOptions
		t    TranscodeOptions
		want []string
	}{
		{name: "defaults", want: []string{"workload", "transcode", "--threads", "2", "-o", "json"}},
		{
			name: "everything",
			c:    ClipOptions{Dir: "/c", Seconds: 1, Width: 320, Height: 180, FPS: 25},
			t:    TranscodeOptions{CRF: -1, Preset: "fast", FFmpeg: "/bin/ffmpeg"},
			want: []string{"workload", "transcode", "--threads", "2", "--cache-dir", "/c", "--seconds", "1",
				"--size", "320x180", "--fps", "25", "--crf", "0", "--preset", "fast", "--ffmpeg", "/bin/ffmpeg", "-o", "json"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, TranscodeArgs(tc.c, tc.t, "2")); diff != "" {
				t.Errorf("TranscodeArgs mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
