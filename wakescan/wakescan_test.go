package wakescan

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corepin/corepin/internal/testutil"
	"github.com/corepin/corepin/measure"
	"github.com/corepin/corepin/store"
	"github.com/corepin/corepin/topology"
)

// features611 is a features file as Linux 6.1 shows it, SIS_UTIL on.
const features611 = "GENTLE_FAIR_SLEEPERS START_DEBIT NO_NEXT_BUDDY LAST_BUDDY CACHE_HOT_BUDDY WAKEUP_PREEMPTION NO_HRTICK NO_HRTICK_DL NO_DOUBLE_TICK NONTASK_CAPACITY TTWU_QUEUE NO_SIS_PROP SIS_UTIL NO_WARN_DOUBLE_CLOCK RT_PUSH_IPI NO_RT_RUNTIME_SHARE NO_LB_MIN ATTACH_AGE_LOAD WA_IDLE WA_WEIGHT WA_BIAS UTIL_EST UTIL_EST_FASTUP NO_LATENCY_WARN ALT_PERIOD BASE_SLICE\n"

// deadOwner is a process that cannot exist: pids stay below 2^22
// (PID_MAX_LIMIT), so no /proc entry ever names it.
var deadOwner = measure.Identity{PID: 1 << 22, Start: 1}

// fakeRoot is a root holding the features file with content data (no
// file when data is "").
func fakeRoot(t *testing.T, data string) string {
	t.Helper()
	root := t.TempDir()
	if data == "" {
		return root
	}
	dir := filepath.Join(root, "sys/kernel/debug/sched")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "features"), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

func features(t *testing.T, root string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, topology.SchedFeaturesFile))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sisUtil is what the fake file says of SIS_UTIL: "on", "off", or the
// parse error.
func sisUtil(t *testing.T, root string) string {
	t.Helper()
	f, err := topology.ParseFeatures([]byte(features(t, root)))
	if err != nil {
		return err.Error()
	}
	if on, ok := f[Feature]; !ok {
		return "absent"
	} else if on {
		return "on"
	}
	return "off"
}

func openDB(t *testing.T) *store.DB {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func record(t *testing.T, db *store.DB) *Record {
	t.Helper()
	s, err := db.LoadSetting(SettingKey)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	rec, err := ParseRecord(s.Value)
	if err != nil {
		t.Fatal(err)
	}
	return &rec
}

func newScan(t *testing.T, db *store.DB, root, name string, owner measure.Identity) *Scan {
	t.Helper()
	s, err := New(db, Options{Root: root, Name: name, Owner: owner})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// liveOther is the identity of a live process other than this one (a
// second BE user), ended at cleanup.
func liveOther(t *testing.T) measure.Identity {
	t.Helper()
	cmd := exec.Command("sleep", "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	id, err := measure.IdentityOf("/proc", cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestHoldAndRelease(t *testing.T) {
	root, db := fakeRoot(t, features611), openDB(t)
	s := newScan(t, db, root, "run", measure.Identity{})
	if err := Probe(root); err != nil {
		t.Fatalf("Probe = %v, want nil on a writable features file", err)
	}
	act, err := s.Hold()
	if err != nil || act != Off {
		t.Fatalf("Hold = %q, %v; want %q", act, err, Off)
	}
	if got := sisUtil(t, root); got != "off" {
		t.Errorf("while held SIS_UTIL is %s, want off (file %q)", got, features(t, root))
	}
	rec := record(t, db)
	if rec == nil || !rec.Prior || len(rec.Holders) != 1 || rec.Holders[0].Name != "run" {
		t.Fatalf("record while held = %+v, want prior true and one holder, run", rec)
	}
	// Holding again is one holder, no second write.
	if act, err := s.Hold(); err != nil || act != None || len(record(t, db).Holders) != 1 {
		t.Errorf("second Hold = %q, %v, %d holders; want no action and one holder", act, err, len(record(t, db).Holders))
	}
	act, err = s.Release()
	if err != nil || act != Restored {
		t.Fatalf("Release = %q, %v; want %q", act, err, Restored)
	}
	if got := sisUtil(t, root); got != "on" {
		t.Errorf("after release SIS_UTIL is %s, want on", got)
	}
	if rec := record(t, db); rec != nil {
		t.Errorf("record after the last release = %+v, want none", rec)
	}
}

// The value found is the one restored, also when it was off already.
func TestRestoresTheValueFound(t *testing.T) {
	root, db := fakeRoot(t, strings.Replace(features611, " SIS_UTIL ", " NO_SIS_UTIL ", 1)), openDB(t)
	s := newScan(t, db, root, "agent", measure.Identity{})
	if act, err := s.Hold(); err != nil || act != None {
		t.Fatalf("Hold with SIS_UTIL off = %q, %v; want no write", act, err)
	}
	if rec := record(t, db); rec == nil || rec.Prior {
		t.Fatalf("record = %+v, want prior false", rec)
	}
	if act, err := s.Release(); err != nil || act != None {
		t.Fatalf("Release = %q, %v; want no write", act, err)
	}
	if got := sisUtil(t, root); got != "off" {
		t.Errorf("after release SIS_UTIL is %s, want off, as found", got)
	}
}

func TestTwoHoldersLastRestores(t *testing.T) {
	root, db := fakeRoot(t, features611), openDB(t)
	a := newScan(t, db, root, "run", measure.Identity{})
	b := newScan(t, db, root, "run", liveOther(t))
	for _, s := range []*Scan{a, b} {
		if _, err := s.Hold(); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(record(t, db).Holders); n != 2 {
		t.Fatalf("%d holders, want 2", n)
	}
	if act, err := a.Release(); err != nil || act != None {
		t.Fatalf("first Release = %q, %v; want no write while the other holds", act, err)
	}
	if got := sisUtil(t, root); got != "off" {
		t.Errorf("after the first release SIS_UTIL is %s, want off: the other holder's BE work still runs", got)
	}
	if act, err := b.Release(); err != nil || act != Restored {
		t.Fatalf("last Release = %q, %v; want %q", act, err, Restored)
	}
	if got := sisUtil(t, root); got != "on" {
		t.Errorf("after the last release SIS_UTIL is %s, want on", got)
	}
}

// A holder killed while holding (here: a process that no longer runs)
// leaves its record; the next start of any holder restores.
func TestRecoverAfterCrash(t *testing.T) {
	tests := []struct {
		name     string
		prepare  func(t *testing.T, db *store.DB, root string)
		want     Action
		wantFeat string
	}{
		{name: "killed after the write", want: Restored, wantFeat: "on",
			prepare: func(t *testing.T, db *store.DB, root string) {
				if _, err := newScan(t, db, root, "agent", deadOwner).Hold(); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "killed between the record and the write", want: None, wantFeat: "on",
			prepare: func(t *testing.T, db *store.DB, root string) {
				saveRecord(t, db, Record{Feature: Feature, Prior: true, BootID: bootID(t), Holders: []Holder{{Name: "agent", Owner: deadOwner.String()}}})
			}},
		{name: "killed during the restore", want: Restored, wantFeat: "on",
			prepare: func(t *testing.T, db *store.DB, root string) {
				if _, err := newScan(t, db, root, "agent", deadOwner).Hold(); err != nil {
					t.Fatal(err)
				}
				// The last holder had dropped itself but not the record.
				saveRecord(t, db, Record{Feature: Feature, Prior: true, BootID: bootID(t), Holders: []Holder{}})
			}},
		{name: "record of an earlier boot", want: None, wantFeat: "off",
			prepare: func(t *testing.T, db *store.DB, root string) {
				if err := os.WriteFile(filepath.Join(root, topology.SchedFeaturesFile), []byte("NO_SIS_UTIL"), 0o644); err != nil {
					t.Fatal(err)
				}
				saveRecord(t, db, Record{Feature: Feature, Prior: true, BootID: "another-boot", Holders: []Holder{{Name: "agent", Owner: deadOwner.String()}}})
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root, db := fakeRoot(t, features611), openDB(t)
			tc.prepare(t, db, root)
			act, err := newScan(t, db, root, "agent", measure.Identity{}).Recover()
			if err != nil || act != tc.want {
				t.Fatalf("Recover = %q, %v; want %q", act, err, tc.want)
			}
			if got := sisUtil(t, root); got != tc.wantFeat {
				t.Errorf("after recover SIS_UTIL is %s, want %s", got, tc.wantFeat)
			}
			if rec := record(t, db); rec != nil {
				t.Errorf("record after recover = %+v, want none", rec)
			}
		})
	}
	t.Run("a live holder keeps it", func(t *testing.T) {
		root, db := fakeRoot(t, features611), openDB(t)
		if _, err := newScan(t, db, root, "run", liveOther(t)).Hold(); err != nil {
			t.Fatal(err)
		}
		if act, err := newScan(t, db, root, "agent", measure.Identity{}).Recover(); err != nil || act != None {
			t.Fatalf("Recover = %q, %v; want nothing while a live run holds", act, err)
		}
		if got := sisUtil(t, root); got != "off" {
			t.Errorf("SIS_UTIL is %s, want off", got)
		}
	})
}

func saveRecord(t *testing.T, db *store.DB, r Record) {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.SaveSetting(SettingKey, b); err != nil {
		t.Fatal(err)
	}
}

func bootID(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Skipf("no boot id: %v", err)
	}
	return strings.TrimSpace(string(b))
}

// Where the file cannot be switched, Probe says why and what to do, and
// Hold changes neither the file nor the state.
func TestUnavailableChangesNothing(t *testing.T) {
	tests := []struct {
		name     string
		data     string
		mode     os.FileMode
		nonRoot  bool
		sentinel error
		msg      string
	}{
		{name: "absent", data: "", sentinel: ErrUnavailable, msg: "mount debugfs"},
		{name: "not writable", data: features611, mode: 0o444, nonRoot: true, sentinel: ErrUnavailable, msg: "run as root"},
		{name: "not readable", data: features611, mode: 0o200, nonRoot: true, sentinel: ErrUnavailable, msg: "run as root"},
		{name: "no SIS_UTIL", data: "GENTLE_FAIR_SLEEPERS NO_SIS_PROP\n", sentinel: ErrUnavailable, msg: "Linux < 6.0"},
		{name: "malformed", data: "SIS_UTIL sis-util\n", sentinel: topology.ErrBadFeatures, msg: "refusing to change"},
		{name: "named twice", data: "SIS_UTIL NO_SIS_UTIL\n", sentinel: topology.ErrBadFeatures, msg: "named twice"},
		{name: "empty", data: " \n", sentinel: topology.ErrBadFeatures, msg: "no features"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.nonRoot && os.Geteuid() == 0 {
				t.Skip("root reads and writes a file whatever its mode")
			}
			root, db := fakeRoot(t, tc.data), openDB(t)
			path := filepath.Join(root, topology.SchedFeaturesFile)
			if tc.mode != 0 {
				if err := os.Chmod(path, tc.mode); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { os.Chmod(path, 0o644) })
			}
			err := Probe(root)
			if !errors.Is(err, tc.sentinel) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Probe = %v, want %v saying %q", err, tc.sentinel, tc.msg)
			}
			if act, err := newScan(t, db, root, "run", measure.Identity{}).Hold(); err == nil || act != None {
				t.Fatalf("Hold = %q, %v; want an error and no action", act, err)
			}
			if rec := record(t, db); rec != nil {
				t.Errorf("record after a refused hold = %+v, want none", rec)
			}
			if tc.data != "" && tc.mode == 0 {
				if got := features(t, root); got != tc.data {
					t.Errorf("features after a refused hold = %q, want %q unchanged", got, tc.data)
				}
			}
		})
	}
}

func TestParseMode(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Mode
		err  bool
	}{
		{in: "", want: Default}, {in: "default", want: Default}, {in: "full", want: Full},
		{in: "Full", err: true}, {in: "on", err: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseMode(tc.in)
			if tc.err {
				if err == nil || !strings.Contains(err.Error(), "want default or full") {
					t.Errorf("ParseMode(%q) = %v, want an error naming default or full", tc.in, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("ParseMode(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestParseRecordRefuses(t *testing.T) {
	for _, tc := range []struct{ name, in, msg string }{
		{name: "unknown key", in: `{"feature":"SIS_UTIL","prior":true,"boot_id":"","holders":[],"x":1}`, msg: "unknown field"},
		{name: "other feature", in: `{"feature":"SIS_PROP","prior":true,"boot_id":"","holders":[]}`, msg: "want SIS_UTIL"},
		{name: "bad owner", in: `{"feature":"SIS_UTIL","prior":true,"boot_id":"","holders":[{"name":"run","owner":"x"}]}`, msg: "PID-START"},
		{name: "no name", in: `{"feature":"SIS_UTIL","prior":true,"boot_id":"","holders":[{"name":"","owner":"1-2"}]}`, msg: "holder name"},
		{name: "trailing", in: `{"feature":"SIS_UTIL","prior":true,"boot_id":"","holders":[]} {}`, msg: "data after"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ParseRecord([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("ParseRecord = %v, want an error saying %q", err, tc.msg)
			}
		})
	}
}

// TestUnavailableAsNobody runs the cases root cannot see (a file this
// user may not write or read) as user nobody.
func TestUnavailableAsNobody(t *testing.T) {
	if os.Getenv("COREPIN_TEST_WAKESCAN_NOBODY") != "" {
		t.Skip("the child run")
	}
	testutil.RunAsNobody(t, "TestUnavailableChangesNothing", "COREPIN_TEST_WAKESCAN_NOBODY=1")
}
