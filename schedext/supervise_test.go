package schedext_test

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/measure"
	"github.com/corepin/corepin/schedext"
	"github.com/corepin/corepin/store"
	"github.com/corepin/corepin/topology"
)

// Scripts standing in for scx_layered. Each appends its pid to $D/starts
// and its arguments to $D/args, checks the config it was handed, and
// acts on the fake sysfs under $S as the kernel would for it. Writes to
// the fake state files go through a rename, as the kernel's are atomic.
const (
	scriptHead = `#!/bin/sh
echo $$ >> "$D/starts"
echo "$*" >> "$D/args"
cfg=
for a; do case $a in f:*) cfg=${a#f:};; esac; done
[ -s "$cfg" ] || { echo "no layer config in: $*" >&2; exit 2; }
put() { printf '%s\n' "$2" > "$S/$1.tmp" && mv "$S/$1.tmp" "$S/$1"; }
`
	// attachScript attaches (ops named as scx_layered 1.1.4 names its
	// scheduler) and detaches on SIGINT, as scx_layered does.
	attachScript = scriptHead + `trap 'put state disabled; put root/ops ""; exit 0' INT TERM
put root/ops layered_1.1.4_x86_64_unknown_linux_gnu
put state enabled
echo "scx_layered: Layered Scheduler Attached" >&2
while :; do sleep 1 & wait $!; done
`
	// stubbornScript attaches and ignores SIGINT.
	stubbornScript = scriptHead + `trap '' INT
put root/ops layered_1.1.4_x86_64_unknown_linux_gnu
put state enabled
while :; do sleep 1 & wait $!; done
`
	// refuseScript fails as scx_layered does on a config or kernel it
	// refuses.
	refuseScript = scriptHead + `echo "libbpf: failed to load BPF skeleton 'bpf_bpf': -EINVAL" >&2
echo "Error: Failed to load BPF program" >&2
exit 1
`
)

const layeredOps = "layered_1.1.4_x86_64_unknown_linux_gnu"

// fake is a machine for the supervisor: a fake sysfs root with
// sys/kernel/sched_ext, a directory the supervisor owns, and the script
// as bin/scx_layered (so that its comm is scx_layered).
type fake struct {
	root, sys, dir, bin string
	records             schedext.Records
	obs                 *observer
}

func newFake(t *testing.T, script string) *fake {
	t.Helper()
	base := t.TempDir()
	f := &fake{root: filepath.Join(base, "root"), dir: filepath.Join(base, "own"), obs: &observer{}}
	f.sys = filepath.Join(f.root, "sys/kernel/sched_ext")
	for _, d := range []string{filepath.Join(f.sys, "root"), f.dir, filepath.Join(base, "bin")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f.kernel(t, "disabled", "")
	f.bin = filepath.Join(base, "bin", "scx_layered")
	body := "#!/bin/sh\nD=" + shq(f.dir) + " S=" + shq(f.sys) + "\n" + strings.TrimPrefix(script, "#!/bin/sh\n")
	if err := os.WriteFile(f.bin, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(filepath.Join(base, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	f.records = schedext.StateRecords(db)
	t.Cleanup(func() { f.killAll(t) })
	return f
}

func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// kernel sets the fake sched_ext state and ops, atomically.
func (f *fake) kernel(t *testing.T, state, ops string) {
	t.Helper()
	for name, v := range map[string]string{"root/ops": ops, "state": state} {
		tmp := filepath.Join(f.sys, name+".tmp")
		if err := os.WriteFile(tmp, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(f.sys, name)); err != nil {
			t.Fatal(err)
		}
	}
}

// starts returns the pids the script was started as, in order.
func (f *fake) starts(t *testing.T) []int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.dir, "starts"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, l := range strings.Fields(string(b)) {
		n, err := strconv.Atoi(l)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}

// killAll ends every script still running (a supervisor leaves them
// running on purpose).
func (f *fake) killAll(t *testing.T) {
	for _, pid := range f.starts(t) {
		if st, err := measure.ReadTaskStat("/proc", pid); err == nil && st.Comm == "scx_layered" {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func (f *fake) options(mod ...func(*schedext.Options)) schedext.Options {
	o := schedext.Options{Binary: f.bin, Dir: f.dir, Root: f.root, Records: f.records, Observer: f.obs,
		Poll: 10 * time.Millisecond, BackoffMin: 20 * time.Millisecond, BackoffMax: 160 * time.Millisecond,
		RefusedWithin: time.Minute, AttachTimeout: time.Hour, HealthyAfter: time.Hour, EjectGrace: time.Hour,
		StopTimeout: time.Minute}
	for _, m := range mod {
		m(&o)
	}
	return o
}

func (f *fake) supervise(t *testing.T, mod ...func(*schedext.Options)) *schedext.Supervisor {
	t.Helper()
	s, err := schedext.Supervise(f.options(mod...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// observer records every transition and the status after it.
type observer struct {
	mu sync.Mutex
	ts []schedext.Transition
	ss []schedext.Status
}

func (o *observer) Transitioned(t schedext.Transition, s schedext.Status) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ts = append(o.ts, t)
	o.ss = append(o.ss, s)
}

// seen returns the transitions so far, with the status after each.
func (o *observer) seen() ([]schedext.Transition, []schedext.Status) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.ts), slices.Clone(o.ss)
}

// find returns the index of the first transition from index from on
// that matches to and reason, -1 if none.
func (o *observer) find(from int, to, reason string) int {
	ts, _ := o.seen()
	for i := from; i < len(ts); i++ {
		if ts[i].To == to && ts[i].Reason == reason {
			return i
		}
	}
	return -1
}

// await polls (never a fixed sleep standing in for a condition) until
// the n-th transition (from index from on) to `to` with reason, and
// returns its index and the status after it.
func (o *observer) await(t *testing.T, from int, to, reason string) (int, schedext.Transition, schedext.Status) {
	t.Helper()
	var i int
	poll(t, fmt.Sprintf("transition to %s (%s)", to, reason), func() bool { i = o.find(from, to, reason); return i >= 0 }, o.String)
	ts, ss := o.seen()
	return i, ts[i], ss[i]
}

func (o *observer) String() string {
	ts, _ := o.seen()
	var b strings.Builder
	for _, t := range ts {
		fmt.Fprintf(&b, "\n  %s -> %s (%s) %s", t.From, t.To, t.Reason, t.Detail)
	}
	return b.String()
}

// poll waits for cond, up to a bound far above what it takes on a busy
// machine; the bound only keeps a broken build from hanging.
func poll(t *testing.T, what string, cond func() bool, state func() string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 60s; seen:%s", what, state())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// running reports whether pid runs as scx_layered (not a zombie).
func running(pid int) bool {
	st, err := measure.ReadTaskStat("/proc", pid)
	return err == nil && st.State != 'Z' && st.Comm == "scx_layered"
}

var inert = []string{topology.RouteCPUIdle, topology.RouteIdleParent, topology.RouteWeight}

// TestSuperviseStartsAndAttaches: scx_layered is started on the layer
// config corepin writes (the setting's arguments first), in a session of
// its own, recorded in the state file by pid and start time, and
// reported attached once the kernel says so, with the routes it leaves
// inert.
func TestSuperviseStartsAndAttaches(t *testing.T) {
	f := newFake(t, attachScript)
	s := f.supervise(t, func(o *schedext.Options) { o.Args = []string{"--disable-topology", "-v"} })
	f.obs.await(t, 0, schedext.StateStarting, schedext.ReasonStarted)
	_, tr, st := f.obs.await(t, 0, schedext.StateAttached, schedext.ReasonAttached)
	if tr.From != schedext.StateStarting {
		t.Errorf("attached from %s, want %s", tr.From, schedext.StateStarting)
	}
	if st.Decides != layeredOps || !slices.Equal(st.InertRoutes, inert) {
		t.Errorf("attached: decides %q, inert %v; want %q and %v", st.Decides, st.InertRoutes, layeredOps, inert)
	}
	pids := f.starts(t)
	if len(pids) != 1 || st.PID != pids[0] || st.Adopted {
		t.Fatalf("started %v, status pid %d adopted %v: want one start, its pid, not adopted", pids, st.PID, st.Adopted)
	}
	want, err := schedext.MarshalLayered(schedext.LayeredConfig())
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(f.dir, schedext.ConfigFile)
	if got, err := os.ReadFile(cfg); err != nil || string(got) != string(want) {
		t.Errorf("config file %s: %v\n%s\nwant\n%s", cfg, err, got, want)
	}
	if args, _ := os.ReadFile(filepath.Join(f.dir, "args")); strings.TrimSpace(string(args)) != "--disable-topology -v f:"+cfg {
		t.Errorf("scx_layered ran with %q, want the setting's arguments, then f:%s", args, cfg)
	}
	ps, err := measure.ReadTaskStat("/proc", pids[0])
	if err != nil {
		t.Fatal(err)
	}
	if ps.PGRP != pids[0] {
		t.Errorf("scx_layered's process group is %d, want its own (%d): a signal to the agent's group would reach it", ps.PGRP, pids[0])
	}
	rec, err := f.records.Load()
	if err != nil || rec == nil {
		t.Fatalf("record: %v, %v", rec, err)
	}
	if rec.PID != pids[0] || rec.Start != ps.StartTime || rec.Comm != "scx_layered" {
		t.Errorf("record %+v, want pid %d start %d comm scx_layered", *rec, pids[0], ps.StartTime)
	}
	if got := s.Status(); got.State != schedext.StateAttached || got.Restarts != 0 || got.Failures != 0 {
		t.Errorf("Status() = %+v, want attached, no restart, no failure", got)
	}
}

// TestSuperviseKilledRestarts: scx_layered killed is reported with the
// signal, the record of it cleared, and a new one started after the
// back-off, counted as a restart.
func TestSuperviseKilledRestarts(t *testing.T) {
	f := newFake(t, attachScript)
	s := f.supervise(t)
	_, _, st := f.obs.await(t, 0, schedext.StateAttached, schedext.ReasonAttached)
	first := st.PID
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	f.kernel(t, "disabled", "") // the kernel detaches a dead scheduler
	i, down, _ := f.obs.await(t, 0, schedext.StateDown, schedext.ReasonKilled)
	if !strings.Contains(down.Detail, "signal: killed") || down.BackoffS != 0.02 {
		t.Errorf("down: detail %q, back-off %vs; want the signal and 0.02s", down.Detail, down.BackoffS)
	}
	f.obs.await(t, i, schedext.StateStarting, schedext.ReasonRestarted)
	_, _, st = f.obs.await(t, i, schedext.StateAttached, schedext.ReasonAttached)
	if st.PID == first || !running(st.PID) || st.Restarts != 1 {
		t.Errorf("after the kill: pid %d (first %d), restarts %d; want a new running process and 1 restart", st.PID, first, st.Restarts)
	}
	if got := f.starts(t); len(got) != 2 {
		t.Errorf("started %v, want two starts", got)
	}
	if rec, err := f.records.Load(); err != nil || rec == nil || rec.PID != st.PID {
		t.Errorf("record %+v (%v), want the new pid %d", rec, err, st.PID)
	}
	_ = s
}

// TestSuperviseRefusedBacksOff: a scx_layered that exits at once (its
// config or the kernel refused) is a failure with its output kept; each
// failure in a row doubles the wait before the next start, up to the
// cap; meanwhile the fair class decides and no route is inert.
func TestSuperviseRefusedBacksOff(t *testing.T) {
	f := newFake(t, refuseScript)
	s := f.supervise(t)
	poll(t, "fifth refusal", func() bool {
		ts, _ := f.obs.seen()
		n := 0
		for _, tr := range ts {
			if tr.To == schedext.StateDown {
				n++
			}
		}
		return n >= 5
	}, f.obs.String)
	ts, ss := f.obs.seen()
	n := 0
	for i, tr := range ts {
		if tr.To != schedext.StateDown || n >= 5 {
			continue
		}
		n++
		if tr.Reason != schedext.ReasonRefused {
			t.Errorf("failure %d: reason %s, want %s", n, tr.Reason, schedext.ReasonRefused)
		}
		if !strings.Contains(tr.Detail, "exit status 1") || !strings.Contains(tr.Detail, "Error: Failed to load BPF program") {
			t.Errorf("failure %d: detail %q, want the exit status and scx_layered's last output", n, tr.Detail)
		}
		want := []time.Duration{20 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond, 160 * time.Millisecond, 160 * time.Millisecond}[n-1]
		if tr.BackoffS != want.Seconds() {
			t.Errorf("failure %d: back-off %vs, want %v", n, tr.BackoffS, want)
		}
		if ss[i].Decides != schedext.Fair || len(ss[i].InertRoutes) != 0 || ss[i].Failures != n {
			t.Errorf("failure %d: decides %q, inert %v, failures %d; want fair, none, %d", n, ss[i].Decides, ss[i].InertRoutes, ss[i].Failures, n)
		}
	}
	if st := s.Status(); st.Restarts < 4 {
		t.Errorf("Status().Restarts = %d, want at least 4", st.Restarts)
	}
}

// TestSuperviseOutputWithoutColours: the output kept of a failure is
// plain text: scx_layered colours its log even into a file (seen under
// qemu: the agent reported "?[2m2026-...?[0m ?[32m INFO?[0m" for every
// line), and the colour sequences are taken out, not shown as "?[...m".
func TestSuperviseOutputWithoutColours(t *testing.T) {
	f := newFake(t, scriptHead+`printf '\033[2m2026-11-28T17:35:27Z\033[0m \033[32m INFO\033[0m ThreadId(01) \033[2mscx_layered\033[0m\033[2m:\033[0m Unregister scx_layered scheduler\n' >&2
echo "Error: EXIT: disabled by sysrq-S" >&2
exit 1
`)
	f.supervise(t)
	_, tr, _ := f.obs.await(t, 0, schedext.StateDown, schedext.ReasonRefused)
	want := "output: 2026-11-28T17:35:27Z  INFO ThreadId(01) scx_layered: Unregister scx_layered scheduler | Error: EXIT: disabled by sysrq-S"
	if !strings.HasSuffix(tr.Detail, want) {
		t.Errorf("detail %q, want it to end %q", tr.Detail, want)
	}
}

// TestSuperviseSlowAttachGetsLonger: a scx_layered that needs longer
// to attach than AttachTimeout is stopped (attach_timeout), and each such
// stop doubles the time the next start gets, so a slow machine's
// scheduler attaches in the end. Seen under qemu at a host load of 11:
// scx_layered took more than the minute to load its BPF program at every
// start, and the agent stopped and restarted it seven times in a row,
// never attached.
func TestSuperviseSlowAttachGetsLonger(t *testing.T) {
	f := newFake(t, scriptHead+`trap 'put state disabled; put root/ops ""; exit 0' INT TERM
i=0; while [ $i -lt 25 ]; do sleep 0.02; i=$((i+1)); done
put root/ops layered_1.1.4_x86_64_unknown_linux_gnu
put state enabled
while :; do sleep 1 & wait $!; done
`)
	s := f.supervise(t, func(o *schedext.Options) { o.AttachTimeout, o.StopTimeout = 50*time.Millisecond, 5*time.Second })
	_, tr, _ := f.obs.await(t, 0, schedext.StateDown, schedext.ReasonAttachTimeout)
	if !strings.Contains(tr.Detail, "not attached 50ms after its start") || !strings.Contains(tr.Detail, "the next start gets 100ms") {
		t.Errorf("first attach_timeout: detail %q, want the time it had and the time the next start gets", tr.Detail)
	}
	f.obs.await(t, 0, schedext.StateAttached, schedext.ReasonAttached)
	if st := s.Status(); st.State != schedext.StateAttached || st.Restarts < 1 {
		t.Errorf("Status() = %+v, want attached after at least one restart", st)
	}
}

// TestBackoff: the defaults' back-off doubles from 1s and stops at 5
// minutes, a cap that is no power of two of the start.
func TestBackoff(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want time.Duration
	}{{1, time.Second}, {2, 2 * time.Second}, {9, 256 * time.Second}, {10, 5 * time.Minute}, {1000, 5 * time.Minute}} {
		if got := schedext.Backoff(schedext.DefaultBackoffMin, schedext.DefaultBackoffMax, tc.n); got != tc.want {
			t.Errorf("Backoff(1s, 5m, %d) = %v, want %v", tc.n, got, tc.want)
		}
	}
}

// TestSuperviseEjected: the kernel detaching the scheduler while the
// process lives is reported at once (the fair class decides again);
// still detached after the grace, the process is stopped and a new one
// started.
func TestSuperviseEjected(t *testing.T) {
	f := newFake(t, attachScript)
	f.supervise(t, func(o *schedext.Options) { o.EjectGrace = 50 * time.Millisecond })
	_, _, st := f.obs.await(t, 0, schedext.StateAttached, schedext.ReasonAttached)
	first := st.PID
	f.kernel(t, "disabled", "")
	i, tr, st := f.obs.await(t, 0, schedext.StateEjected, schedext.ReasonEjected)
	if tr.From != schedext.StateAttached || st.Decides != schedext.Fair || len(st.InertRoutes) != 0 || st.PID != first {
		t.Errorf("ejected: from %s, decides %q, inert %v, pid %d; want from attached, fair, none, %d", tr.From, st.Decides, st.InertRoutes, st.PID, first)
	}
	j, down, _ := f.obs.await(t, i, schedext.StateDown, schedext.ReasonEjected)
	if !strings.Contains(down.Detail, "SIGINT") {
		t.Errorf("down after the ejection: %q, want it stopped by SIGINT", down.Detail)
	}
	_, _, st = f.obs.await(t, j, schedext.StateAttached, schedext.ReasonAttached)
	if st.PID == first || running(first) {
		t.Errorf("after the ejection: pid %d, first %d running %v; want a new process and the first gone", st.PID, first, running(first))
	}
}

// TestSuperviseAdopts: a second supervisor (the agent restarted) adopts
// the scx_layered the first left running, by the record in the state
// file, and starts none; when the adopted one dies it notices by polling
// and starts another.
func TestSuperviseAdopts(t *testing.T) {
	f := newFake(t, attachScript)
	s1 := f.supervise(t)
	_, _, st := f.obs.await(t, 0, schedext.StateAttached, schedext.ReasonAttached)
	pid := st.PID
	s1.Close()
	if !running(pid) {
		t.Fatalf("scx_layered %d ended with its supervisor", pid)
	}
	f.obs = &observer{}
	s2 := f.supervise(t)
	_, tr, st := f.obs.await(t, 0, schedext.StateAttached, schedext.ReasonAdopted)
	if st.PID != pid || !st.Adopted || !strings.Contains(tr.Detail, strconv.Itoa(pid)) {
		t.Errorf("adopted pid %d (adopted %v, %q), want %d", st.PID, st.Adopted, tr.Detail, pid)
	}
	if got := f.starts(t); len(got) != 1 {
		t.Fatalf("started %v, want the first start only", got)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	f.kernel(t, "disabled", "")
	i, down, _ := f.obs.await(t, 0, schedext.StateDown, schedext.ReasonExited)
	if !strings.Contains(down.Detail, "adopted") {
		t.Errorf("down: %q, want it to say the exit status of an adopted process is unknown", down.Detail)
	}
	_, _, st = f.obs.await(t, i, schedext.StateAttached, schedext.ReasonAttached)
	if st.PID == pid || st.Adopted {
		t.Errorf("after the adopted one died: pid %d adopted %v, want a new child", st.PID, st.Adopted)
	}
	_ = s2
}

// TestSuperviseOutlivesAgentGroup: the agent's whole process group
// killed (as a terminal's ^C or a unit stop killing the group does)
// leaves scx_layered running, and the next agent adopts it. The agent
// here is this test binary run again as TestHelperAgent.
func TestSuperviseOutlivesAgentGroup(t *testing.T) {
	f := newFake(t, attachScript)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperAgent$")
	cmd.Env = append(os.Environ(), "COREPIN_SCX_HELPER="+strings.Join([]string{f.bin, f.dir, f.root, filepath.Join(filepath.Dir(f.dir), "state.db")}, "\n"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := 0
	for sc := bufio.NewScanner(out); pid == 0 && sc.Scan(); {
		if n, ok := strings.CutPrefix(sc.Text(), "attached "); ok {
			pid, _ = strconv.Atoi(n)
		}
	}
	if pid <= 0 {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("the helper agent never said the pid it attached")
	}
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if !running(pid) {
		t.Fatalf("scx_layered %d died with the agent's process group", pid)
	}
	f.supervise(t)
	_, _, st := f.obs.await(t, 0, schedext.StateAttached, schedext.ReasonAdopted)
	if st.PID != pid {
		t.Errorf("adopted pid %d, want %d", st.PID, pid)
	}
	if got := f.starts(t); len(got) != 1 {
		t.Errorf("started %v, want one start", got)
	}
}

// TestHelperAgent is the agent of TestSuperviseOutlivesAgentGroup: it
// supervises until attached, says the pid, and waits to be killed.
func TestHelperAgent(t *testing.T) {
	env := os.Getenv("COREPIN_SCX_HELPER")
	if env == "" {
		t.Skip("run by TestSuperviseOutlivesAgentGroup")
	}
	p := strings.Split(env, "\n")
	db, err := store.Open(p[3])
	if err != nil {
		t.Fatal(err)
	}
	obs := &observer{}
	s, err := schedext.Supervise(schedext.Options{Binary: p[0], Dir: p[1], Root: p[2], Records: schedext.StateRecords(db), Observer: obs,
		Poll: 10 * time.Millisecond, AttachTimeout: time.Hour, RefusedWithin: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	_, _, st := obs.await(t, 0, schedext.StateAttached, schedext.ReasonAttached)
	fmt.Printf("attached %d\n", st.PID)
	s.Close()
	select {}
}

// TestSuperviseStaleRecord: a record whose process is gone, whose pid
// now names another process (another start time) or another program
// (another comm) is discarded, and a new scx_layered started.
func TestSuperviseStaleRecord(t *testing.T) {
	self, err := measure.Self()
	if err != nil {
		t.Fatal(err)
	}
	done := exec.Command("true")
	if err := done.Run(); err != nil {
		t.Fatal(err)
	}
	const spec = "0000000000000000000000000000000000000000000000000000000000000000"
	for _, tc := range []struct {
		name string
		rec  schedext.Record
		why  string
	}{
		{"process gone", schedext.Record{PID: done.Process.Pid, Start: 1, Comm: "scx_layered", Spec: spec}, "is gone"},
		{"pid reused", schedext.Record{PID: self.PID, Start: self.Start + 1, Comm: "scx_layered", Spec: spec}, "another process"},
		{"another program", schedext.Record{PID: self.PID, Start: self.Start, Comm: "scx_layered", Spec: spec}, "not \"scx_layered\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, attachScript)
			if err := f.records.Save(tc.rec); err != nil {
				t.Fatal(err)
			}
			f.supervise(t)
			_, tr, _ := f.obs.await(t, 0, schedext.StateStarting, schedext.ReasonStaleRecord)
			if !strings.Contains(tr.Detail, tc.why) {
				t.Errorf("stale record: %q, want it to say %q", tr.Detail, tc.why)
			}
			_, _, st := f.obs.await(t, 0, schedext.StateAttached, schedext.ReasonAttached)
			if got := f.starts(t); len(got) != 1 || st.PID != got[0] {
				t.Errorf("started %v, status pid %d: want one new start", got, st.PID)
			}
			if rec, err := f.records.Load(); err != nil || rec == nil || rec.PID != st.PID {
				t.Errorf("record %+v (%v), want the new pid %d", rec, err, st.PID)
			}
		})
	}
}

// TestSuperviseConfigChanged: a recorded scx_layered started with other
// arguments is stopped and one on the new setting started.
func TestSuperviseConfigChanged(t *testing.T) {
	f := newFake(t, attachScript)
	s1 := f.supervise(t)
	_, _, st := f.obs.await(t, 0, schedext.StateAttached, schedext.ReasonAttached)
	first := st.PID
	s1.Close()
	f.obs = &observer{}
	f.supervise(t, func(o *schedext.Options) { o.Args = []string{"--no-load-frac-limit"} })
	_, tr, _ := f.obs.await(t, 0, schedext.StateStarting, schedext.ReasonConfigChanged)
	if !strings.Contains(tr.Detail, "SIGINT") || running(first) {
		t.Errorf("config changed: %q, first running %v; want the first stopped by SIGINT", tr.Detail, running(first))
	}
	f.obs.await(t, 0, schedext.StateAttached, schedext.ReasonAttached)
}

// TestSuperviseForeignAndUnavailable: a scheduler corepin did not start
// is never fought: nothing starts until it detaches; a kernel without
// sched_ext gets nothing started.
func TestSuperviseForeignAndUnavailable(t *testing.T) {
	t.Run("foreign", func(t *testing.T) {
		f := newFake(t, attachScript)
		f.kernel(t, "enabled", "rusty_1.0.0")
		s := f.supervise(t)
		_, _, st := f.obs.await(t, 0, schedext.StateForeign, schedext.ReasonForeign)
		if st.Decides != "rusty_1.0.0" || !slices.Equal(st.InertRoutes, inert) {
			t.Errorf("foreign: decides %q, inert %v", st.Decides, st.InertRoutes)
		}
		if got := f.starts(t); len(got) != 0 {
			t.Fatalf("started %v beside a foreign scheduler", got)
		}
		f.kernel(t, "disabled", "")
		f.obs.await(t, 0, schedext.StateAttached, schedext.ReasonAttached)
		_ = s
	})
	t.Run("unavailable", func(t *testing.T) {
		f := newFake(t, attachScript)
		if err := os.RemoveAll(f.sys); err != nil {
			t.Fatal(err)
		}
		s := f.supervise(t)
		_, _, st := f.obs.await(t, 0, schedext.StateUnavailable, schedext.ReasonUnavailable)
		if st.Decides != schedext.Fair || len(st.InertRoutes) != 0 {
			t.Errorf("unavailable: decides %q, inert %v", st.Decides, st.InertRoutes)
		}
		s.Close()
		if got := f.starts(t); len(got) != 0 {
			t.Errorf("started %v on a kernel without sched_ext", got)
		}
	})
}

// TestStopRecorded: the setting removed, the agent stops the recorded
// scx_layered (SIGINT; SIGKILL after the bound for one that ignores it)
// and deletes the record; a stale record is only deleted.
func TestStopRecorded(t *testing.T) {
	for _, tc := range []struct {
		name, script, how string
		timeout           time.Duration
	}{
		{"SIGINT", attachScript, "(SIGINT)", time.Minute},
		{"SIGKILL after the bound", stubbornScript, "(SIGKILL after 100ms)", 100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, tc.script)
			s := f.supervise(t)
			_, _, st := f.obs.await(t, 0, schedext.StateAttached, schedext.ReasonAttached)
			s.Close()
			o := f.options(func(o *schedext.Options) { o.Binary, o.StopTimeout = "", tc.timeout })
			did, err := schedext.StopRecorded(o)
			if err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf("stopped scx_layered pid %d %s", st.PID, tc.how); did != want {
				t.Errorf("StopRecorded() = %q, want %q", did, want)
			}
			poll(t, "end of the process", func() bool { return !running(st.PID) }, func() string { return "" })
			if rec, err := f.records.Load(); err != nil || rec != nil {
				t.Errorf("record after the stop: %+v, %v; want none", rec, err)
			}
			if did, err := schedext.StopRecorded(o); did != "" || err != nil {
				t.Errorf("StopRecorded() again = %q, %v; want nothing to do", did, err)
			}
		})
	}
	t.Run("stale", func(t *testing.T) {
		f := newFake(t, attachScript)
		rec := schedext.Record{PID: 1 << 22, Start: 1, Comm: "scx_layered", Spec: strings.Repeat("a", 64)}
		if err := f.records.Save(rec); err != nil {
			t.Fatal(err)
		}
		did, err := schedext.StopRecorded(f.options())
		if err != nil || !strings.Contains(did, "stale") {
			t.Errorf("StopRecorded() = %q, %v; want a stale record discarded", did, err)
		}
		if got, _ := f.records.Load(); got != nil {
			t.Errorf("record %+v kept", got)
		}
	})
}

// TestParseRecord: the record round-trips; what is not one is refused.
func TestParseRecord(t *testing.T) {
	spec := strings.Repeat("ab", 32)
	good := schedext.Record{PID: 42, Start: 7, Comm: "scx_layered", Spec: spec}
	got, err := schedext.ParseRecord([]byte(`{"pid":42,"start":7,"comm":"scx_layered","spec":"` + spec + `"}`))
	if err != nil || got != good {
		t.Fatalf("ParseRecord = %+v, %v; want %+v", got, err, good)
	}
	for _, tc := range []struct{ name, in string }{
		{"empty", ``},
		{"unknown key", `{"pid":42,"start":7,"comm":"scx_layered","spec":"` + spec + `","x":1}`},
		{"trailing", `{"pid":42,"start":7,"comm":"scx_layered","spec":"` + spec + `"} {}`},
		{"zero pid", `{"pid":0,"start":7,"comm":"scx_layered","spec":"` + spec + `"}`},
		{"no comm", `{"pid":42,"start":7,"comm":"","spec":"` + spec + `"}`},
		{"long comm", `{"pid":42,"start":7,"comm":"scx_layered_12345","spec":"` + spec + `"}`},
		{"short spec", `{"pid":42,"start":7,"comm":"scx_layered","spec":"ab"}`},
		{"upper-case spec", `{"pid":42,"start":7,"comm":"scx_layered","spec":"` + strings.ToUpper(spec) + `"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if r, err := schedext.ParseRecord([]byte(tc.in)); err == nil {
				t.Errorf("ParseRecord(%s) = %+v, want an error", tc.in, r)
			}
		})
	}
}

// TestSettingValidate: the node setting is refused at config load with
// what to give.
func TestSettingValidate(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "scx_layered")
	plain := filepath.Join(dir, "plain")
	for p, mode := range map[string]os.FileMode{exe: 0o755, plain: 0o644} {
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		in   schedext.Setting
		want string // in the error; "" valid
	}{
		{"default off", schedext.Setting{}, ""},
		{"off", schedext.Setting{Mode: "off"}, ""},
		{"layered", schedext.Setting{Mode: "layered", Binary: exe, Args: []string{"--disable-topology"}}, ""},
		{"unknown mode", schedext.Setting{Mode: "rusty"}, "want off or layered"},
		{"binary with mode off", schedext.Setting{Binary: exe}, "only with mode layered"},
		{"relative binary", schedext.Setting{Mode: "layered", Binary: "scx_layered"}, "absolute path"},
		{"missing binary", schedext.Setting{Mode: "layered", Binary: filepath.Join(dir, "nope")}, "no such file"},
		{"directory", schedext.Setting{Mode: "layered", Binary: dir}, "not a regular file"},
		{"not executable", schedext.Setting{Mode: "layered", Binary: plain}, "not executable"},
		{"config argument", schedext.Setting{Mode: "layered", Binary: exe, Args: []string{"f:/tmp/x.json"}}, "corepin passes its own"},
		{"inline config", schedext.Setting{Mode: "layered", Binary: exe, Args: []string{"--disable-topology", ` [{"name":"all","matches":[[]],"kind":{"Open":{}}}]`}}, "inline layer config"},
		{"inline layer", schedext.Setting{Mode: "layered", Binary: exe, Args: []string{"{\"name\":\"x\"}"}}, "inline layer config"},
		{"too many arguments", schedext.Setting{Mode: "layered", Binary: exe, Args: make([]string, schedext.MaxArgs+1)}, "at most 64"},
		{"long argument", schedext.Setting{Mode: "layered", Binary: exe, Args: []string{strings.Repeat("x", schedext.MaxArgLen+1)}}, "longer than"},
		{"NUL in an argument", schedext.Setting{Mode: "layered", Binary: exe, Args: []string{"a\x00b"}}, "NUL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.in.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate() error = %v", err)
				}
				if got.Mode == "" {
					t.Errorf("Validate() = %+v, want a mode", got)
				}
				return
			}
			if err == nil || !errors.Is(err, schedext.ErrBadSetting) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate() error = %v, want ErrBadSetting with %q", err, tc.want)
			}
		})
	}
	if d := cmp.Diff(schedext.Modes, []string{"off", "layered"}); d != "" {
		t.Errorf("Modes (-got +want):\n%s", d)
	}
}
