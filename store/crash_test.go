package store

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// envCrashChild makes the test binary act as crashChild instead of running
// tests: TestCrashSafety re-executes itself with it and SIGKILLs the child.
const envCrashChild = "COREPIN_STORE_CRASH_CHILD_DB"

func TestMain(m *testing.M) {
	if path := os.Getenv(envCrashChild); path != "" {
		crashChild(path)
		os.Exit(3) // crashChild never returns normally
	}
	os.Exit(m.Run())
}

// bigJob is sampleJob(i) with a stderr tail of 1 to 24 KiB, larger than a
// page, so a torn write would show as a short or mixed tail.
func bigJob(i int) Job {
	j := sampleJob(i)
	line := fmt.Sprintf("frame=%6d fps= 25 q=28.0 size= %d kB\r", i, i*7)
	j.StderrTail = strings.Repeat(line, (1+i%24)*1024/len(line))
	return j
}

// crashChild writes until it is killed: per step, one job of a new run and
// one admitted assignment "r<run>-<i>".
func crashChild(path string) {
	db, err := Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	id, err := db.BeginRun(Run{Command: "crash"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("ready")
	for i := 0; ; i++ {
		if err := db.AddJob(id, bigJob(i)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		name := fmt.Sprintf("r%d-%d", id, i)
		if _, err := db.Admit(name, func([]Assignment) (Assignment, error) {
			return Assignment{Cpuset: fmt.Sprint(i), QoS: "LSE"}, nil
		}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}

// TestCrashSafety kills a writer at a random moment, several times, and
// checks after each kill that the file opens, that every job row is whole,
// that each run's jobs and assignments are a gapless prefix, and that no
// earlier run lost anything.
func TestCrashSafety(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	path := filepath.Join(t.TempDir(), "crash.db")
	counts := map[int64]int{} // jobs per run seen after earlier kills
	total := 0
	for round := range 6 {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), envCrashChild+"="+path)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil || line != "ready\n" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("round %d: child said %q, %v", round, line, err)
		}
		time.Sleep(time.Duration(rand.IntN(150)) * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		err = cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("round %d: child ended with %v, not by SIGKILL", round, err)
		}

		db, err := Open(path)
		if err != nil {
			t.Fatalf("round %d: reopening after SIGKILL: %v", round, err)
		}
		jobs, err := db.Jobs(0)
		if err != nil {
			t.Fatal(err)
		}
		as, err := db.Assignments()
		if err != nil {
			t.Fatal(err)
		}
		db.Close()

		now := map[int64]int{}
		for _, j := range jobs {
			want := bigJob(now[j.RunID])
			want.RunID = j.RunID
			if diff := cmp.Diff(want, j); diff != "" {
				t.Fatalf("round %d: job %d of run %d is not the job written as number %d (-want +got):\n%s",
					round, j.Job, j.RunID, now[j.RunID], diff)
			}
			now[j.RunID]++
		}
		for run, n := range counts {
			if now[run] != n {
				t.Errorf("round %d: run %d has %d jobs, had %d after its child was killed", round, run, now[run], n)
			}
		}
		admitted := map[string]bool{}
		for _, a := range as {
			admitted[a.Name] = true
		}
		for run, n := range now {
			// The child admits "r<run>-<i>" right after job i: i < n-1 must be
			// there, n-1 may be, n must not.
			for i := range n - 1 {
				if !admitted[fmt.Sprintf("r%d-%d", run, i)] {
					t.Errorf("round %d: assignment r%d-%d lost", round, run, i)
				}
			}
			if admitted[fmt.Sprintf("r%d-%d", run, n)] {
				t.Errorf("round %d: assignment r%d-%d present without job %d", round, run, n, n)
			}
		}
		if len(jobs) < total {
			t.Fatalf("round %d: %d jobs, fewer than the %d before", round, len(jobs), total)
		}
		t.Logf("round %d: killed after %d jobs (%d in all)", round, len(jobs)-total, len(jobs))
		total, counts = len(jobs), now
	}
}
