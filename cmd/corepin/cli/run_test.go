package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/internal/testutil"
	"github.com/corepin/corepin/nodecore"
	"github.com/corepin/corepin/runner"
	"github.com/corepin/corepin/store"
)

// TestMain lets the test binary serve as enforce.Start's shim, as
// cmd/corepin does.
func TestMain(m *testing.M) {
	enforce.ShimMain()
	// Pinned runs share one state file (issue 10 §2); the tests' runs share
	// theirs, never the machine's /var/lib/corepin.
	dir, err := os.MkdirTemp("", "corepin-cli")
	if err != nil {
		panic(err)
	}
	if os.Getenv(nodecore.EnvState) == "" {
		os.Setenv(nodecore.EnvState, filepath.Join(dir, "state.db"))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// Issue 8 §3: input errors of corepin run exit 2 up front, say what to
// change, and start no job.
func TestRunBadInputExitsTwoBeforeAnyJob(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	touch := []string{"--", "touch", marker}
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	binary := write("binary.txt", []byte("touch "+marker+"\n\x7fELF\x02\x01\x01\x00\x00\x00"))
	nul := write("nul.txt", []byte("touch "+marker+"\necho a\x00b\n"))
	latin1 := write("latin1.txt", []byte("touch "+marker+"\necho \xe9t\xe9\n"))
	cgroupDB := "/sys/fs/cgroup/cpu/corepin-run-test-db/results.db"
	tests := []struct {
		name string
		args []string
		msg  string
	}{
		{name: "BE pinned", args: []string{"--qos", "BE", "--mode", "pinned"}, msg: "drop --mode pinned"},
		{name: "LSE quota", args: []string{"--qos", "LSE", "--mode", "quota"}, msg: "use --mode pinned"},
		{name: "suppress without BE", args: []string{"--qos", "LS", "--suppress"}, msg: "--suppress applies to --qos BE only"},
		{name: "threads 100000", args: []string{"--threads", "100000"}, msg: "per CPU of this machine"},
		{name: "cpus 1e9", args: []string{"--cpus", "1e9", "--mode", "quota"}, msg: "or fewer"},
		{name: "pinned concurrency x cpus", args: []string{"--concurrency", "1000", "--jobs", "1000"}, msg: "use --concurrency"},
		{name: "quota below minimum", args: []string{"--cpus", "0.001", "--mode", "quota"}, msg: "kernel's minimum"},
		{name: "affinity with quota", args: []string{"--driver", "affinity", "--mode", "quota"}, msg: "--driver affinity cannot enforce --mode quota"},
		{name: "negative sample interval", args: []string{"--sample-interval", "-1s"}, msg: "--sample-interval -1s"},
		{name: "unknown driver", args: []string{"--driver", "bogus"}, msg: "unknown --driver"},
		{name: "too many jobs", args: []string{"--jobs", "1000000000"}, msg: "--jobs 1000000000"},
		{name: "db in a missing directory", args: []string{"--db", filepath.Join(dir, "no", "such", "r.db")}, msg: "does not exist"},
		{name: "db on cgroupfs", args: []string{"--db", cgroupDB}, msg: "on cgroup"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := resultsCLI(t, append(append([]string{"run"}, tc.args...), touch...)...)
			if code != 2 || !strings.Contains(stderr, tc.msg) || strings.Count(stderr, "\n") != 1 {
				t.Errorf("exit %d, stderr %q; want exit 2 and one line with %q", code, stderr, tc.msg)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("a job ran")
			}
		})
	}
	for _, tc := range []struct{ name, args, msg string }{
		{name: "nonexistent command", args: "corepin-no-such-cmd", msg: "install it or give its full path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := resultsCLI(t, "run", "--no-db", "--", tc.args)
			if code != 2 || !strings.Contains(stderr, tc.msg) {
				t.Errorf("exit %d, stderr %q; want exit 2 with %q", code, stderr, tc.msg)
			}
		})
	}
	for _, tc := range []struct{ name, file string }{{"binary jobs file", binary}, {"NUL in jobs file", nul}, {"invalid UTF-8 jobs file", latin1}} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := resultsCLI(t, "run", "--no-db", "--jobs-file", tc.file)
			if code != 2 || !strings.Contains(stderr, "is not text") {
				t.Errorf("exit %d, stderr %q; want exit 2, not text", code, stderr)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("a job ran")
			}
		})
	}
	if _, err := os.Stat(filepath.Dir(cgroupDB)); err == nil {
		os.Remove(filepath.Dir(cgroupDB))
		t.Errorf("--db created the cgroup %s", filepath.Dir(cgroupDB))
	}
}

// Issue 8 §3: corepin run --qos BE -- CMD exited 2; it now picks the
// shared pool's mode itself (unbounded, idle) and runs.
func TestRunQoSPicksMode(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: corepin's BE root needs a writable cgroup (root)")
	}
	for _, tc := range []struct{ qos, mode string }{{"BE", "unbounded"}, {"LS", "quota"}, {"LSE", "pinned"}} {
		t.Run(tc.qos, func(t *testing.T) {
			out, stderr, code := resultsCLI(t, "run", "--no-db", "-o", "json", "--qos", tc.qos, "--cpus", "1", "--", "true")
			if code != 0 {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
			var job struct {
				Mode     string `json:"mode"`
				QoS      string `json:"qos"`
				ExitCode int    `json:"exit_code"`
			}
			sc := bufio.NewScanner(strings.NewReader(out))
			if !sc.Scan() || json.Unmarshal(sc.Bytes(), &job) != nil {
				t.Fatalf("output %q is not a job object", out)
			}
			if job.Mode != tc.mode || job.QoS != tc.qos || job.ExitCode != 0 {
				t.Errorf("job = %+v, want mode %s qos %s exit 0", job, tc.mode, tc.qos)
			}
		})
	}
}

// FuzzParseJobsFile: any jobs file parses into at most runner.MaxJobs
// text commands or is a usage error, never a panic.
func FuzzParseJobsFile(f *testing.F) {
	f.Add([]byte("echo a\n# comment\n\n  sleep 1  \n"))
	f.Add([]byte("a\x00b\n"))
	f.Add([]byte("\xff\xfe\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cmds, err := parseJobsFile("f", data)
		if err != nil {
			var ue *UsageError
			if !errors.As(err, &ue) {
				t.Fatalf("error %v is not a usage error", err)
			}
			return
		}
		if len(cmds) == 0 || len(cmds) > runner.MaxJobs {
			t.Fatalf("%d commands", len(cmds))
		}
		for _, c := range cmds {
			if len(c) != 3 || c[2] == "" || strings.ContainsRune(c[2], 0) || !utf8.ValidString(c[2]) || strings.HasPrefix(c[2], "#") {
				t.Fatalf("command %q", c)
			}
		}
	})
}

// Exit codes are decided in one place: the core's bad-input sentinels are
// exit 2 even when a command passes them up unwrapped.
func TestIsUsage(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{name: "usage error", err: Usagef("bad flag"), want: true},
		{name: "wrapped batch error", err: fmt.Errorf("running: %w", runner.ErrSpec), want: true},
		{name: "database place", err: fmt.Errorf("opening: %w", store.ErrPlace), want: true},
		{name: "system failure", err: errors.New("creating cgroup: permission denied"), want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := isUsage(tc.err); got != tc.want {
				t.Errorf("isUsage(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

// Issue 8 §3: what a job leaves running is said on stderr (pid and comm).
func TestRunSaysLeftovers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: needs a writable cgroup (root)")
	}
	script := `setsid sleep 1000 </dev/null >/dev/null 2>&1 & pid=$!
while [ "$(cat /proc/$pid/comm)" != sleep ]; do :; done`
	_, stderr, code := resultsCLI(t, "run", "--no-db", "--qos", "LS", "--", "sh", "-c", script)
	if code != 0 || !strings.Contains(stderr, "corepin: job 0 left 1 process running; killed it: ") || !strings.Contains(stderr, " (sleep)") {
		t.Errorf("exit %d, stderr %q; want exit 0 and the leftover named", code, stderr)
	}
}

// Issue 27 §3.5: a job that left 100 processes was reported as "left 64
// process(es) running, killed them" (the list's cap as the count). It
// says all 100, all killed, and that the 64 named are the first.
func TestRunCountsEveryLeftover(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: needs a writable cgroup (root)")
	}
	script := `i=0; while [ $i -lt 100 ]; do sleep 1000 </dev/null >/dev/null 2>&1 & i=$((i+1)); done`
	_, stderr, code := resultsCLI(t, "run", "--no-db", "--qos", "LS", "--", "sh", "-c", script)
	if code != 0 || !strings.Contains(stderr, "corepin: job 0 left 100 processes running; killed all of them (the first 64: ") {
		t.Errorf("exit %d, stderr %q; want exit 0 and all 100 leftovers counted", code, stderr)
	}
}

// Issue 17 §2: as a user without root whose shell runs at nice 5, every
// pinned job failed ("setting scheduling policy of thread N: operation not
// permitted"), and nine note lines came before any job. As nobody at nice
// +5, with the default results database in a home it may not write, the
// run now exits 0 with each job on its one CPU at the caller's nice, and
// says all it has to say in one note line (each note in full with -v).
func TestRunAsNobodyAtNice(t *testing.T) {
	if os.Getenv("COREPIN_TEST_RUN_NOBODY") == "1" {
		runAsNobodyAtNice(t)
		return
	}
	// nobody's home (passwd) does not exist; its state file is the test's.
	testutil.RunAsNobodyNicer(t, "TestRunAsNobodyAtNice", "COREPIN_TEST_RUN_NOBODY=1",
		"HOME=/nonexistent", store.EnvDB+"=", "XDG_DATA_HOME=", "XDG_STATE_HOME=", nodecore.EnvState+"=")
}

func runAsNobodyAtNice(t *testing.T) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Fatal(err)
	}
	own := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))[16]
	job := `echo "job {job} want {cpuset} got $(grep Cpus_allowed_list /proc/self/status | cut -f2) nice $(cut -d' ' -f19 /proc/self/stat)"`
	for _, verbose := range []bool{false, true} {
		t.Run(fmt.Sprintf("verbose %v", verbose), func(t *testing.T) {
			args := []string{"run", "-o", "json", "--mode", "pinned", "--cpus", "1", "--jobs", "2"}
			if verbose {
				args = append(args, "-v")
			}
			stdout, stderr, code := resultsCLI(t, append(args, "--", "sh", "-c", job)...)
			if code != 0 {
				t.Fatalf("as uid %d at nice %s: exit %d, stderr:\n%s", os.Geteuid(), own, code, stderr)
			}
			var jobs int
			for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
				var r struct {
					Job      int    `json:"job"`
					Cpuset   string `json:"cpuset"`
					ExitCode int    `json:"exit_code"`
				}
				if err := json.Unmarshal([]byte(line), &r); err != nil || r.ExitCode != 0 {
					t.Errorf("job line %q: %v, want exit 0", line, err)
				}
				jobs++
			}
			if jobs != 2 {
				t.Errorf("%d job objects, want 2: %q", jobs, stdout)
			}
			var notes []string
			ran := 0
			for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
				var n int
				var want, got, nice string
				switch {
				case strings.HasPrefix(line, "corepin: note: "):
					notes = append(notes, line)
				case strings.HasPrefix(line, "job "):
					if _, err := fmt.Sscanf(line, "job %d want %s got %s nice %s", &n, &want, &got, &nice); err != nil {
						t.Fatalf("job output %q: %v", line, err)
					}
					// One CPU each, the one it was given, at the caller's nice.
					if got != want || strings.ContainsAny(got, ",-") || nice != own {
						t.Errorf("job %d ran on %s at nice %s; want its cpuset %s, one CPU, at nice %s", n, got, nice, want, own)
					}
					ran++
				case strings.HasPrefix(line, "["): // progress
				default:
					t.Errorf("unexpected stderr line %q", line)
				}
			}
			if ran != 2 {
				t.Errorf("%d jobs printed, want 2; stderr:\n%s", ran, stderr)
			}
			if !verbose {
				if len(notes) != 1 || !strings.Contains(notes[0], "results not recorded") || !strings.HasSuffix(notes[0], "-v for details") {
					t.Fatalf("notes %q: want one line saying results are not recorded, ending in -v for details", notes)
				}
				if strings.Contains(notes[0], "affinity only") && !strings.Contains(notes[0], "jobs keep nice "+own) {
					t.Errorf("note %q: the affinity driver without a note that jobs keep nice %s", notes[0], own)
				}
				return
			}
			if len(notes) < 2 || !strings.Contains(strings.Join(notes, "\n"), "permission denied") {
				t.Errorf("-v notes %q: want each in full, the database's permission denied among them", notes)
			}
		})
	}
}

// Issue 27 §3.5: --driver cgroup-v2 on a cgroup v1 machine said
// "(detected cgroup-v1: )" and exited 1. Asking for a cgroup driver this
// machine can not give is bad input: exit 2, why, and the drivers that
// work here.
func TestRunUnusableDriverIsBadInput(t *testing.T) {
	other := enforce.NameV2
	if d, err := enforce.Detect(); err == nil && d.Name() == enforce.NameV2 {
		other = enforce.NameV1
	}
	if d, err := enforce.DetectNamed(other); err == nil {
		t.Skipf("skipping: both cgroup drivers work here (%s)", d.Name())
	}
	_, stderr, code := resultsCLI(t, "run", "--no-db", "--driver", other, "--", "true")
	want := "corepin: --driver " + other + " is not usable here ("
	if code != 2 || !strings.HasPrefix(stderr, want) || !strings.Contains(stderr, "); drivers that work here: auto, ") ||
		!strings.HasSuffix(strings.TrimSpace(stderr), ", affinity") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("exit %d, stderr %q; want exit 2 and one line %q... naming the drivers that work here", code, stderr, want)
	}
}
