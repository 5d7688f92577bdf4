package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corepin/corepin/workload"
)

// runCLI runs corepin with args and returns its streams and exit code.
func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	code = Main(args, strings.NewReader(""), &o, &e)
	return o.String(), e.String(), code
}

func TestWorkloadSpin(t *testing.T) {
	t.Setenv(workload.EnvThreads, "3")
	stdout, stderr, code := runCLI(t, "workload", "spin", "--seconds", "0.2", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	r, err := workload.ParseReport([]byte(stdout))
	if err != nil {
		t.Fatalf("ParseReport(%q): %v", stdout, err)
	}
	if r.Spin == nil || r.Spin.Ops <= 0 || r.Spin.Threads != 3 || r.Spin.WallS <= 0 {
		t.Errorf("spin report = %+v, want ops > 0 on $%s = 3 threads", r.Spin, workload.EnvThreads)
	}

	stdout, stderr, code = runCLI(t, "workload", "spin", "--seconds", "0.1", "--threads", "1")
	if code != 0 || !strings.HasPrefix(stdout, "spin: ") || !strings.HasSuffix(stdout, "(threads 1)\n") || strings.Count(stdout, "\n") != 1 {
		t.Errorf("text output = %q (exit %d, stderr %q), want one line \"spin: ... (threads 1)\"", stdout, code, stderr)
	}
}

func TestWorkloadSpinOps(t *testing.T) {
	stdout, stderr, code := runCLI(t, "workload", "spin", "--ops", "500", "--threads", "2", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	r, err := workload.ParseReport([]byte(stdout))
	if err != nil {
		t.Fatalf("ParseReport(%q): %v", stdout, err)
	}
	if s := r.Spin; s == nil || s.Ops != 500 || s.TargetOps != 500 || s.Seconds != 0 || s.Threads != 2 {
		t.Errorf("spin --ops 500 report = %+v, want 500 ops on 2 threads", s)
	}
}

func TestWorkloadBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  string
	}{
		{name: "spin zero threads", args: []string{"workload", "spin", "--threads", "0"}},
		{name: "spin words for threads", args: []string{"workload", "spin", "--threads", "lots"}},
		{name: "spin zero seconds", args: []string{"workload", "spin", "--seconds", "0"}},
		{name: "spin NaN seconds", args: []string{"workload", "spin", "--seconds", "NaN"}},
		{name: "spin bad env", args: []string{"workload", "spin", "--seconds", "0.1"}, env: "two"},
		{name: "spin ops and seconds", args: []string{"workload", "spin", "--ops", "5", "--seconds", "1"}},
		{name: "spin zero ops", args: []string{"workload", "spin", "--ops", "0"}},
		{name: "spin unknown flag", args: []string{"workload", "spin", "--bogus"}},
		{name: "spin argument", args: []string{"workload", "spin", "extra"}},
		{name: "no subcommand", args: []string{"workload"}},
		{name: "transcode odd size", args: []string{"workload", "transcode", "--size", "321x180"}},
		{name: "transcode bad size", args: []string{"workload", "transcode", "--size", "big"}},
		{name: "transcode crf", args: []string{"workload", "transcode", "--crf", "52"}},
		{name: "transcode seconds", args: []string{"workload", "transcode", "--seconds", "0"}},
		{name: "transcode fps", args: []string{"workload", "transcode", "--fps", "0"}},
		{name: "transcode preset", args: []string{"workload", "transcode", "--preset", "-y"}},
		{name: "transcode threads", args: []string{"workload", "transcode", "--threads", "-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv(workload.EnvThreads, tc.env)
			}
			stdout, stderr, code := runCLI(t, tc.args...)
			if code != 2 {
				t.Errorf("exit = %d, want 2 (stdout %q, stderr %q)", code, stdout, stderr)
			}
			if strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "corepin: ") {
				t.Errorf("stderr = %q, want one corepin: line", stderr)
			}
		})
	}
}

func TestWorkloadTranscodeNoFFmpeg(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "ffmpeg")
	stdout, stderr, code := runCLI(t, "workload", "transcode", "--ffmpeg", missing, "--cache-dir", t.TempDir())
	if code != 1 || stdout != "" {
		t.Errorf("exit = %d, stdout %q, want 1 and nothing", code, stdout)
	}
	if strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "apt-get install ffmpeg") {
		t.Errorf("stderr = %q, want one line naming apt-get install ffmpeg", stderr)
	}
}

func TestWorkloadTranscode(t *testing.T) {
	if err := workload.FFmpegAvailable(); err != nil {
		t.Skipf("skipping: needs ffmpeg with libx264 (%s): %v", workload.InstallHint, err)
	}
	cache := t.TempDir()
	tiny := []string{"--cache-dir", cache, "--size", "320x180", "--seconds", "1", "--fps", "30"}

	args := append([]string{"workload", "transcode", "--prepare"}, tiny...)
	stdout, stderr, code := runCLI(t, args...)
	clip := strings.TrimSpace(stdout)
	if code != 0 || !strings.Contains(stderr, "generating the test clip once") {
		t.Fatalf("--prepare: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if st, err := os.Stat(clip); err != nil || st.Size() == 0 {
		t.Fatalf("--prepare printed %q: %v, want the cached clip", clip, err)
	}

	args = append([]string{"workload", "transcode", "--threads", "1", "-o", "json"}, tiny...)
	stdout, stderr, code = runCLI(t, args...)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if stderr != "" {
		t.Errorf("stderr = %q with the clip cached, want nothing", stderr)
	}
	r, err := workload.ParseReport([]byte(stdout))
	if err != nil {
		t.Fatalf("ParseReport(%q): %v", stdout, err)
	}
	if tr := r.Transcode; tr == nil || tr.Frames != 30 || tr.Threads != 1 || tr.Clip != clip || tr.CRF != 22 || tr.Preset != "medium" {
		t.Errorf("transcode report = %+v, want 30 frames of %s, 1 thread, crf 22, medium", tr, clip)
	}

	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	args = append([]string{"workload", "transcode", "--threads", "2", "--write", "--preset", "ultrafast", "--crf", "0"}, tiny...)
	stdout, stderr, code = runCLI(t, args...)
	if code != 0 || !strings.HasPrefix(stdout, "transcode: 30 frames in ") || !strings.Contains(stdout, "(threads 2, 320x180, crf 0, ultrafast)") {
		t.Errorf("--write: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if left, err := os.ReadDir(tmp); err != nil || len(left) != 0 {
		t.Errorf("--write left %v in $TMPDIR (%v), want the output deleted", left, err)
	}
}
