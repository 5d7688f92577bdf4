package agent

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corepin/corepin/nodecore"
	"github.com/corepin/corepin/schedext"
)

const layeredOps = "layered_1.1.4_x86_64_unknown_linux_gnu"

// fakeScx is a stand-in for scx_layered over a fake sysfs root: it
// attaches (state enabled, ops layered_...), and detaches and exits on
// SIGINT, as scx_layered does.
func fakeScx(t *testing.T) (bin, root string) {
	t.Helper()
	dir := t.TempDir()
	root = filepath.Join(dir, "root")
	sys := filepath.Join(root, "sys/kernel/sched_ext")
	if err := os.MkdirAll(filepath.Join(sys, "root"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]string{"state": "disabled\n", "root/ops": "\n"} {
		if err := os.WriteFile(filepath.Join(sys, name), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin = filepath.Join(dir, "scx_layered")
	script := fmt.Sprintf(`#!/bin/sh
S='%s'
put() { printf '%%s\n' "$2" > "$S/$1.tmp" && mv "$S/$1.tmp" "$S/$1"; }
trap 'put state disabled; put root/ops ""; exit 0' INT TERM
put root/ops layered_1.1.4_x86_64_unknown_linux_gnu
put state enabled
while :; do sleep 1 & wait $!; done
`, sys)
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, root
}

// attachedSchedExt opens the agent's sched_ext side with set and polls
// until scx_layered is attached; it returns it and scx_layered's pid,
// killed when the test ends.
func attachedSchedExt(t *testing.T, set schedext.Setting, state, root string, log *slog.Logger, obs schedext.Observer) (*schedExt, int) {
	t.Helper()
	x, err := openSchedExt(set, state, root, log, obs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	for deadline := time.Now().Add(time.Minute); x.Status().State != schedext.StateAttached; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not attached within a minute: %+v", x.Status())
		}
	}
	pid := x.Status().PID
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	return x, pid
}

// TestSchedExtSetting: with sched_ext layered the agent supervises
// scx_layered and says so in its metrics and in GET /v1/topology (what
// ctl top prints); stopped, it leaves scx_layered running; started again
// with the setting removed, it stops it and says nothing more.
func TestSchedExtSetting(t *testing.T) {
	bin, root := fakeScx(t)
	state := filepath.Join(t.TempDir(), "state.db")
	log := slog.New(slog.DiscardHandler)
	m := NewMetrics()
	x, pid := attachedSchedExt(t, schedext.Setting{Mode: schedext.ModeLayered, Binary: bin}, state, root, log, m)
	if got, want := series(t, m, "corepin_sched_ext_route_state"), []string{"decides=" + layeredOps + ",state=attached 1"}; !slices.Equal(got, want) {
		t.Errorf("corepin_sched_ext_route_state = %q, want %q", got, want)
	}
	if got := counter(t, m, "corepin_sched_ext_route_transitions_total", "reason", "attached"); got != 1 {
		t.Errorf("transitions to attached = %v, want 1", got)
	}
	n, _ := newNode(t)
	v, err := NewClient(serve(t, &Server{Node: n, SchedExt: x.Status}), "").Topology()
	if err != nil || v.SchedExt == nil || v.SchedExt.State != schedext.StateAttached || v.SchedExt.PID != pid ||
		len(v.SchedExt.InertRoutes) != 3 {
		t.Fatalf("GET /v1/topology sched_ext_route = %+v (%v), want attached, pid %d, three inert routes", v.SchedExt, err, pid)
	}
	if lines := v.SchedExt.Lines(); !strings.Contains(lines[0], "attached: "+layeredOps+" decides; BE routes that cannot act: cpu_idle, idle_parent, weight") ||
		!strings.Contains(lines[1], "starting -> attached, attached") {
		t.Errorf("ctl top lines:\n%s", strings.Join(lines, "\n"))
	}
	x.Close()
	if !scxRunning(pid) {
		t.Fatalf("scx_layered %d ended with the agent", pid)
	}
	off, err := openSchedExt(schedext.Setting{}, state, root, log, m)
	if err != nil {
		t.Fatal(err)
	}
	if off.Status() != nil {
		t.Errorf("Status() with the setting off = %+v, want nil", off.Status())
	}
	for deadline := time.Now().Add(time.Minute); scxRunning(pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("scx_layered %d still runs after an agent started with the setting off", pid)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(root, "sys/kernel/sched_ext/state")); strings.TrimSpace(string(b)) != "disabled" {
		t.Errorf("sched_ext state %q after the stop, want disabled (stopped by SIGINT, not killed)", b)
	}
}

func scxRunning(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && strings.Contains(string(b), "(scx_layered) ") && !strings.Contains(string(b), ") Z ")
}

// series lists name's series in m as "label=value,... value".
func series(t *testing.T, m *Metrics, name string) []string {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		for _, s := range mf.GetMetric() {
			if mf.GetName() != name {
				continue
			}
			var ls []string
			for _, l := range s.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			out = append(out, fmt.Sprintf("%s %g", strings.Join(ls, ","), s.GetGauge().GetValue()))
		}
	}
	return out
}

// TestSchedExtStopWithSettingRemoved: at a clean stop the agent reads its
// config again; sched_ext still there (or the file unreadable) leaves
// scx_layered running, sched_ext removed stops it (SIGINT) and deletes
// its record.
func TestSchedExtStopWithSettingRemoved(t *testing.T) {
	bin, root := fakeScx(t)
	state := filepath.Join(t.TempDir(), "state.db")
	log := slog.New(slog.DiscardHandler)
	layered := schedext.Setting{Mode: schedext.ModeLayered, Binary: bin}
	x, pid := attachedSchedExt(t, layered, state, root, log, nil)
	x.stopIfRemoved(func() (Config, error) { return Config{SchedExt: layered}, nil }, log)
	x.stopIfRemoved(func() (Config, error) { return Config{}, fmt.Errorf("reading the config: gone") }, log)
	if !scxRunning(pid) {
		t.Fatalf("scx_layered %d stopped while the setting is still there or the config unreadable", pid)
	}
	x.stopIfRemoved(func() (Config, error) { return Config{}, nil }, log)
	if scxRunning(pid) {
		t.Errorf("scx_layered %d runs after a clean stop with the setting removed", pid)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "sys/kernel/sched_ext/state")); strings.TrimSpace(string(b)) != "disabled" {
		t.Errorf("sched_ext state %q after the stop, want disabled (stopped by SIGINT)", b)
	}
	x.Close()
	db, err := nodecore.OpenState(state)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if rec, err := schedext.StateRecords(db).Load(); rec != nil || err != nil {
		t.Errorf("record after the stop: %+v, %v; want none", rec, err)
	}
}
