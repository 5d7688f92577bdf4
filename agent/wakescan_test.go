package agent

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corepin/corepin/internal/testutil"
	"github.com/corepin/corepin/measure"
	"github.com/corepin/corepin/nodecore"
	"github.com/corepin/corepin/store"
	"github.com/corepin/corepin/topology"
	"github.com/corepin/corepin/wakescan"
)

// syncBuffer is a log sink the tests read while the scan writes.
type syncBuffer = testutil.SyncBuffer

const sisOn = "WA_IDLE SIS_UTIL NO_SIS_PROP\n"

// wakeRoot is a machine root whose features file says data ("" none).
func wakeRoot(t *testing.T, data string) string {
	t.Helper()
	root := t.TempDir()
	if data != "" {
		p := filepath.Join(root, topology.SchedFeaturesFile)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// sis is SIS_UTIL's state in root's features file: on, off or absent.
func sis(t *testing.T, root string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, topology.SchedFeaturesFile))
	if errors.Is(err, os.ErrNotExist) {
		return "no file"
	}
	if err != nil {
		t.Fatal(err)
	}
	f, err := topology.ParseFeatures(b)
	if err != nil {
		t.Fatal(err)
	}
	on, ok := f[wakescan.Feature]
	switch {
	case !ok:
		return "absent"
	case on:
		return "on"
	}
	return "off"
}

func hasRecord(t *testing.T, state string) bool {
	t.Helper()
	db, err := nodecore.OpenState(state)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = db.LoadSetting(wakescan.SettingKey)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

var (
	beWorkload = []Workload{{Name: "batch", QoS: "BE"}, {Name: "web", QoS: "LS"}}
	lsWorkload = []Workload{{Name: "web", QoS: "LS"}}
)

func TestAgentWakeScanFollowsBEWork(t *testing.T) {
	root, state := wakeRoot(t, sisOn), filepath.Join(t.TempDir(), "agent.db")
	var logs syncBuffer
	w, err := openWakeScan(wakescan.Full, state, root, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name string
		ws   []Workload
		want string
	}{
		{name: "no BE work", ws: lsWorkload, want: "on"},
		{name: "BE work runs", ws: beWorkload, want: "off"},
		{name: "still runs", ws: beWorkload, want: "off"},
		{name: "BE work ended", ws: lsWorkload, want: "on"},
		{name: "BE work again", ws: beWorkload, want: "off"},
	}
	for _, st := range steps {
		w.Sync(hasBE(st.ws))
		if got := sis(t, root); got != st.want {
			t.Fatalf("%s: SIS_UTIL %s, want %s (log:\n%s)", st.name, got, st.want, logs.String())
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := sis(t, root); got != "on" {
		t.Errorf("after the agent stopped: SIS_UTIL %s, want on, as found", got)
	}
	if hasRecord(t, state) {
		t.Error("a record is left after the agent stopped")
	}
}

// An agent killed while holding leaves the record; its next start
// restores the value found (no BE work left), or keeps the switch and
// takes it over (BE work still runs).
func TestAgentWakeScanRestartAfterCrash(t *testing.T) {
	for _, tc := range []struct {
		name string
		ws   []Workload
		want string
	}{
		{name: "no BE work left", ws: lsWorkload, want: "on"},
		{name: "BE work still runs", ws: beWorkload, want: "off"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, state := wakeRoot(t, sisOn), filepath.Join(t.TempDir(), "agent.db")
			db, err := nodecore.OpenState(state)
			if err != nil {
				t.Fatal(err)
			}
			crashed, err := wakescan.New(db, wakescan.Options{Root: root, Name: "agent", Owner: measure.Identity{PID: 1 << 22, Start: 1}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := crashed.Hold(); err != nil {
				t.Fatal(err)
			}
			db.Close()
			if got := sis(t, root); got != "off" {
				t.Fatalf("before the restart SIS_UTIL %s, want off", got)
			}
			w, err := openWakeScan(wakescan.Full, state, root, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			if got := sis(t, root); got != "on" {
				t.Errorf("after the restart SIS_UTIL %s, want on: the dead holder's change undone", got)
			}
			w.Sync(hasBE(tc.ws))
			if got := sis(t, root); got != tc.want {
				t.Errorf("after the first sync SIS_UTIL %s, want %s", got, tc.want)
			}
		})
	}
}

// Where the file cannot be switched the agent says so once, changes
// nothing and runs on; with default it changes nothing either.
func TestAgentWakeScanChangesNothing(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		mode       wakescan.Mode
		once       string
		want       string
	}{
		{name: "absent", mode: wakescan.Full, once: "mount debugfs", want: "no file"},
		{name: "malformed", data: "SIS_UTIL lower\n", mode: wakescan.Full, once: "refusing to change"},
		{name: "default", data: sisOn, mode: wakescan.Default, want: "on"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, state := wakeRoot(t, tc.data), filepath.Join(t.TempDir(), "agent.db")
			var logs syncBuffer
			w, err := openWakeScan(tc.mode, state, root, slog.New(slog.NewTextHandler(&logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				w.Sync(hasBE(beWorkload))
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if tc.once != "" {
				if n := strings.Count(logs.String(), tc.once); n != 1 {
					t.Errorf("log says %q %d times, want once:\n%s", tc.once, n, logs.String())
				}
			} else if logs.String() != "" {
				t.Errorf("log: %s, want nothing", logs.String())
			}
			if tc.want != "" {
				if got := sis(t, root); got != tc.want {
					t.Errorf("SIS_UTIL %s, want %s", got, tc.want)
				}
			} else if b, _ := os.ReadFile(filepath.Join(root, topology.SchedFeaturesFile)); string(b) != tc.data {
				t.Errorf("features %q, want %q unchanged", b, tc.data)
			}
			if hasRecord(t, state) {
				t.Error("a record was written")
			}
		})
	}
}
