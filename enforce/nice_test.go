package enforce

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/corepin/corepin/internal/testutil"
)

// callerNice returns the nice this test process runs at and the lowest
// nice it may give its threads by the kernel's rule (sched(7)): -20 with
// CAP_SYS_NICE (read from /proc/self/status), else 20 - RLIMIT_NICE at
// the lowest, and never worse than its own. It does not use ProbeNice,
// which the tests check against it.
func callerNice(t *testing.T) (own, lowest int) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if own, err = strconv.Atoi(f[16]); err != nil {
		t.Fatalf("nice in /proc/self/stat: %v", err)
	}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatalf("CapEff %q: %v", v, err)
			}
			if caps&(1<<unix.CAP_SYS_NICE) != 0 {
				return own, -20
			}
		}
	}
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NICE, &rl); err != nil {
		t.Fatal(err)
	}
	return own, min(own, 20-int(min(rl.Cur, 40)))
}

// ProbeNice finds what the kernel's rule says, whatever this process's
// nice and rights: run it under `nice -n 5`, as root and as nobody.
func TestProbeNice(t *testing.T) {
	own, lowest := callerNice(t)
	l, err := ProbeNice()
	if err != nil {
		t.Fatal(err)
	}
	if want := (NiceLimit{Own: own, Lowest: lowest}); l != want {
		t.Errorf("ProbeNice() as uid %d = %+v, want %+v", os.Geteuid(), l, want)
	}
	if want := os.Getenv("COREPIN_TEST_NICE_OWN"); want != "" && strconv.Itoa(l.Own) != want {
		t.Errorf("ProbeNice().Own = %d, want %s (run by nice(1))", l.Own, want)
	}
}

// Issue 17 §2: a user without root whose shell runs at nice 5 had every
// job of the affinity driver fail ("setting scheduling policy of thread
// N: operation not permitted"): a Weight of 100 asked for nice 0, which
// such a user may not go back to. The jobs now run, confined, keeping the
// lowest nice the caller may give (its own), and Limitations says so once.
func TestAffinityKeepsCallersNice(t *testing.T) {
	if os.Getenv("COREPIN_TEST_NICE_OWN") != "" {
		runAffinityKeepsCallersNice(t)
		return
	}
	t.Run("as this user", runAffinityKeepsCallersNice)
	own, _ := callerNice(t)
	t.Run("as nobody, nicer", func(t *testing.T) {
		testutil.RunAsNobodyNicer(t, "TestAffinityKeepsCallersNice",
			"COREPIN_TEST_NICE_OWN="+strconv.Itoa(min(own+testutil.NicerBy, 19)))
		testutil.RunAsNobodyNicer(t, "TestProbeNice",
			"COREPIN_TEST_NICE_OWN="+strconv.Itoa(min(own+testutil.NicerBy, 19)))
	})
}

func runAffinityKeepsCallersNice(t *testing.T) {
	own, lowest := callerNice(t)
	if want := os.Getenv("COREPIN_TEST_NICE_OWN"); want != "" && strconv.Itoa(own) != want {
		t.Fatalf("running at nice %d, want %s", own, want)
	}
	d, err := NewAffinity()
	if err != nil {
		t.Fatal(err)
	}
	noted := false
	for _, l := range d.Limitations() {
		noted = noted || strings.Contains(l, "nice") && strings.Contains(l, "CAP_SYS_NICE")
	}
	if noted != (lowest > -20) {
		t.Errorf("Limitations() = %q at lowest nice %d: a note on nice %v, want %v", d.Limitations(), lowest, noted, lowest > -20)
	}
	cpus := highestCPU(t)
	const script = `grep Cpus_allowed_list /proc/self/status; set -- $(cat /proc/$$/stat); echo "nice=${19} policy=${41}"`
	for _, tc := range []struct {
		name   string
		r      Resources
		nice   int
		policy int
	}{
		{name: "default weight", r: Resources{CPUs: cpus}, nice: max(0, lowest)},
		{name: "high weight", r: Resources{CPUs: cpus, Weight: 10000}, nice: max(-20, lowest)},
		{name: "low weight", r: Resources{CPUs: cpus, Weight: 1}, nice: max(19, lowest)},
		{name: "idle", r: Resources{CPUs: cpus, Idle: true}, nice: own, policy: unix.SCHED_IDLE},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := d.Create("nice", tc.r)
			if err != nil {
				t.Fatal(err)
			}
			out, _ := runIn(t, g, script)
			want := "Cpus_allowed_list:\t" + cpus.String() + "\nnice=" + strconv.Itoa(tc.nice) + " policy=" + strconv.Itoa(tc.policy) + "\n"
			if out != want {
				t.Errorf("as uid %d at nice %d: child output = %q, want %q", os.Geteuid(), own, out, want)
			}
		})
	}
}
