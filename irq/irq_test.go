package irq

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/measure"
	"github.com/corepin/corepin/store"
)

// deadOwner is a process that cannot exist: pids stay below 2^22
// (PID_MAX_LIMIT), so no /proc entry ever names it.
var deadOwner = measure.Identity{PID: 1 << 22, Start: 1}

// machine is the fake root's interrupts on 8 CPUs: 10 movable, 11 a
// per-CPU one (its writes refused by refusing), 12 only on CPUs 4-5, 13
// off them, 14 as a kernel writes it with a trailing NUL.
var machine = map[int]string{10: "0-7\n", 11: "0-7\n", 12: "4-5\n", 13: "0-3\n", 14: "2-7\x00\n"}

// fakeRoot is a root holding proc/irq with irqs (number -> affinity file).
func fakeRoot(t *testing.T, irqs map[int]string) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, Dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "default_smp_affinity"), []byte("ff\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for n, aff := range irqs {
		d := filepath.Join(dir, strconv.Itoa(n))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{AffinityFile, EffectiveFile} {
			if err := os.WriteFile(filepath.Join(d, f), []byte(aff), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return root
}

// affinity is what the fake root's file of irq n says, trimmed.
func affinity(t *testing.T, root string, n int) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, Dir, strconv.Itoa(n), AffinityFile))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Trim(string(b), "\n\x00")
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

// newSteer is holder name's handle on root; irq 11 refuses writes as the
// kernel refuses them for a per-CPU interrupt.
func newSteer(t *testing.T, db *store.DB, root, name string, owner measure.Identity, o Options) *Steer {
	t.Helper()
	o.Root, o.Name, o.Owner = root, name, owner
	s, err := New(db, o)
	if err != nil {
		t.Fatal(err)
	}
	s.write = func(r *os.Root, n int, set cpuset.CPUSet) error {
		if n == 11 {
			return &os.PathError{Op: "write", Path: "proc/irq/11/smp_affinity_list", Err: syscall.EIO}
		}
		return writeAffinity(r, n, set)
	}
	return s
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

// liveOther is the identity of a live process other than this one (a
// second holder), ended at cleanup.
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

func affinities(t *testing.T, root string) map[int]string {
	got := map[int]string{}
	for n := range machine {
		got[n] = affinity(t, root, n)
	}
	return got
}

var found = map[int]string{10: "0-7", 11: "0-7", 12: "4-5", 13: "0-3", 14: "2-7"}

func TestHoldAndRelease(t *testing.T) {
	root, db := fakeRoot(t, machine), openDB(t)
	banned := filepath.Join(t.TempDir(), "run", "irqbalance.env")
	s := newSteer(t, db, root, "run", measure.Identity{}, Options{BannedFile: banned})
	rep, err := s.Hold("job-0", cpuset.New(4, 5))
	if err != nil {
		t.Fatalf("Hold = %v", err)
	}
	want := Report{Kept: cpuset.New(4, 5), Moved: []int{10, 14}, Stuck: []int{12},
		Refused: []Refusal{{IRQ: 11, Err: "write proc/irq/11/smp_affinity_list: input/output error"}}}
	if d := cmp.Diff(want, rep, cmp.Comparer(cpuset.CPUSet.Equals)); d != "" {
		t.Errorf("Hold report (-want +got):\n%s", d)
	}
	held := map[int]string{10: "0-3,6-7", 11: "0-7", 12: "4-5", 13: "0-3", 14: "2-3,6-7"}
	if d := cmp.Diff(held, affinities(t, root)); d != "" {
		t.Errorf("affinities while held (-want +got):\n%s", d)
	}
	rec := record(t, db)
	if d := cmp.Diff([]Prior{{IRQs: "10", Affinity: "0-7", Set: "0-3,6-7"}, {IRQs: "14", Affinity: "2-7", Set: "2-3,6-7"}}, rec.Prior); d != "" {
		t.Errorf("recorded prior affinities (-want +got):\n%s", d)
	}
	if b, err := os.ReadFile(banned); err != nil || !strings.Contains(string(b), "IRQBALANCE_BANNED_CPULIST=4-5\n") ||
		!strings.Contains(string(b), "IRQBALANCE_BANNED_CPUS=00000030\n") {
		t.Errorf("banned file = %q, %v; want the list 4-5 and the mask 00000030", b, err)
	}
	rep, err = s.Release("job-0")
	if err != nil {
		t.Fatalf("Release = %v", err)
	}
	if d := cmp.Diff([]int{10, 14}, rep.Restored); d != "" {
		t.Errorf("restored (-want +got):\n%s", d)
	}
	if d := cmp.Diff(found, affinities(t, root)); d != "" {
		t.Errorf("affinities after release (-want +got):\n%s", d)
	}
	if rec := record(t, db); rec != nil {
		t.Errorf("record after the last release = %+v, want none", rec)
	}
	if _, err := os.Stat(banned); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("banned file after the last release: %v, want it removed", err)
	}
}

// Where nothing could be moved (the only interrupt runs only on the held
// CPUs), no affinity is recorded, and the last release still removes
// irqbalance's banned CPUs.
func TestNothingMovableBannedFileRemoved(t *testing.T) {
	root, db := fakeRoot(t, map[int]string{12: "4-5\n"}), openDB(t)
	banned := filepath.Join(t.TempDir(), "irqbalance.env")
	s := newSteer(t, db, root, "run", measure.Identity{}, Options{BannedFile: banned})
	rep, err := s.Hold("job-0", cpuset.New(4, 5))
	if err != nil || len(rep.Stuck) != 1 || len(rep.Moved) != 0 {
		t.Fatalf("Hold = %+v, %v; want irq 12 stuck and nothing moved", rep, err)
	}
	if _, err := os.Stat(banned); err != nil {
		t.Errorf("banned file while held: %v", err)
	}
	if _, err := s.Release("job-0"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(banned); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("banned file after the last release: %v, want it removed", err)
	}
	if rec := record(t, db); rec != nil {
		t.Errorf("record after the last release = %+v, want none", rec)
	}
}

// Two holders with overlapping CPUs: the release of one keeps the
// other's CPUs clear; the last gives the affinities found back.
func TestTwoHoldersOverlap(t *testing.T) {
	root, db := fakeRoot(t, machine), openDB(t)
	a := newSteer(t, db, root, "run", measure.Identity{}, Options{})
	b := newSteer(t, db, root, "agent", liveOther(t), Options{})
	if _, err := a.Hold("job-0", cpuset.New(4, 5)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Hold("web", cpuset.New(5, 6)); err != nil {
		t.Fatal(err)
	}
	if got := affinity(t, root, 10); got != "0-3,7" {
		t.Errorf("irq 10 with 4-6 kept clear = %s, want 0-3,7", got)
	}
	if _, err := a.Release("job-0"); err != nil {
		t.Fatal(err)
	}
	for n, want := range map[int]string{10: "0-4,7", 14: "2-4,7", 12: "4"} {
		if got := affinity(t, root, n); got != want {
			t.Errorf("irq %d after the first release = %s, want %s (5-6 still kept clear for web)", n, got, want)
		}
	}
	if _, err := b.Release("web"); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(found, affinities(t, root)); d != "" {
		t.Errorf("affinities after the last release (-want +got):\n%s", d)
	}
	if rec := record(t, db); rec != nil {
		t.Errorf("record after the last release = %+v, want none", rec)
	}
}

// Another writer (irqbalance, an administrator) moving an interrupt after
// corepin's write: off the kept CPUs its choice stands, now and after the
// release (corepin forgets the interrupt); back onto them corepin steers
// it off again and gives back the affinity found at release.
func TestAnotherWriter(t *testing.T) {
	for _, tc := range []struct {
		name, moved   string
		held, release string // irq 10 after the next change, after the release
		yielded       []int
	}{
		{name: "off the kept CPUs", moved: "2", held: "2", release: "2", yielded: []int{10}},
		{name: "onto the kept CPUs", moved: "4", held: "0-3,6-7", release: "0-7"},
		{name: "onto kept and others", moved: "1,5", held: "0-3,6-7", release: "0-7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, db := fakeRoot(t, machine), openDB(t)
			s := newSteer(t, db, root, "agent", measure.Identity{}, Options{})
			if _, err := s.Hold("web", cpuset.New(4, 5)); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(root, Dir, "10", AffinityFile)
			if err := os.WriteFile(p, []byte(tc.moved+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			rep, err := s.Sync(map[string]cpuset.CPUSet{"web": cpuset.New(4, 5)}) // the agent's next sweep
			if err != nil {
				t.Fatal(err)
			}
			if got := affinity(t, root, 10); got != tc.held {
				t.Errorf("irq 10 moved to %s, after the next change = %s, want %s", tc.moved, got, tc.held)
			}
			if d := cmp.Diff(tc.yielded, rep.Yielded); d != "" {
				t.Errorf("yielded (-want +got):\n%s", d)
			}
			if got := affinity(t, root, 14); got != "2-3,6-7" {
				t.Errorf("irq 14 = %s, want 2-3,6-7: still corepin's", got)
			}
			if _, err := s.Release("web"); err != nil {
				t.Fatal(err)
			}
			if got := affinity(t, root, 10); got != tc.release {
				t.Errorf("irq 10 after the release = %s, want %s", got, tc.release)
			}
			if got := affinity(t, root, 14); got != "2-7" {
				t.Errorf("irq 14 after the release = %s, want 2-7, as found", got)
			}
			if rec := record(t, db); rec != nil {
				t.Errorf("record after the last release = %+v, want none", rec)
			}
		})
	}
}

// A holder killed while holding (a process that no longer runs) leaves
// its record; the next start of any holder restores, and an agent that
// syncs the workloads it still runs keeps them clear.
func TestRecoverAfterCrash(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, db *store.DB, root string)
		recover func(s *Steer) (Report, error)
		want    map[int]string
		holders int
	}{
		{name: "killed while holding",
			prepare: func(t *testing.T, db *store.DB, root string) {
				if _, err := newSteer(t, db, root, "agent", deadOwner, Options{}).Hold("web", cpuset.New(4, 5)); err != nil {
					t.Fatal(err)
				}
			},
			recover: (*Steer).Recover, want: found},
		{name: "killed between the record and the write",
			prepare: func(t *testing.T, db *store.DB, root string) {
				saveRecord(t, db, Record{Prior: []Prior{{IRQs: "10", Affinity: "0-7"}, {IRQs: "14", Affinity: "2-7"}},
					Holders: []Holder{{Name: "run", Owner: deadOwner.String(), ID: "job-0", CPUs: "4-5"}}})
			},
			recover: (*Steer).Recover, want: found},
		{name: "agent restarted with its workload still running",
			prepare: func(t *testing.T, db *store.DB, root string) {
				if _, err := newSteer(t, db, root, "agent", deadOwner, Options{}).Hold("web", cpuset.New(4, 5)); err != nil {
					t.Fatal(err)
				}
			},
			recover: func(s *Steer) (Report, error) { return s.Sync(map[string]cpuset.CPUSet{"web": cpuset.New(4, 5)}) },
			want:    map[int]string{10: "0-3,6-7", 11: "0-7", 12: "4-5", 13: "0-3", 14: "2-3,6-7"}, holders: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root, db := fakeRoot(t, machine), openDB(t)
			tc.prepare(t, db, root)
			if _, err := tc.recover(newSteer(t, db, root, "agent", measure.Identity{}, Options{})); err != nil {
				t.Fatalf("recover = %v", err)
			}
			if d := cmp.Diff(tc.want, affinities(t, root)); d != "" {
				t.Errorf("affinities after recovery (-want +got):\n%s", d)
			}
			rec := record(t, db)
			switch {
			case tc.holders == 0 && rec != nil:
				t.Errorf("record after recovery = %+v, want none", rec)
			case tc.holders > 0 && (rec == nil || len(rec.Holders) != tc.holders || rec.Holders[0].Owner == deadOwner.String()):
				t.Errorf("record after recovery = %+v, want %d live holder(s)", rec, tc.holders)
			}
		})
	}
	t.Run("a live holder keeps it", func(t *testing.T) {
		root, db := fakeRoot(t, machine), openDB(t)
		if _, err := newSteer(t, db, root, "run", liveOther(t), Options{}).Hold("job-0", cpuset.New(4, 5)); err != nil {
			t.Fatal(err)
		}
		if _, err := newSteer(t, db, root, "agent", measure.Identity{}, Options{}).Recover(); err != nil {
			t.Fatal(err)
		}
		if got := affinity(t, root, 10); got != "0-3,6-7" {
			t.Errorf("irq 10 = %s, want 0-3,6-7 while a live run holds", got)
		}
	})
	t.Run("record of an earlier boot", func(t *testing.T) {
		root, db := fakeRoot(t, machine), openDB(t)
		saveRecord(t, db, Record{BootID: "another-boot", Prior: []Prior{{IRQs: "13", Affinity: "0-7"}},
			Holders: []Holder{{Name: "run", Owner: deadOwner.String(), ID: "job-0", CPUs: "4-5"}}})
		s := newSteer(t, db, root, "agent", measure.Identity{}, Options{})
		if s.boot == "" {
			t.Skip("no boot id here")
		}
		if _, err := s.Recover(); err != nil {
			t.Fatal(err)
		}
		if got := affinity(t, root, 13); got != "0-3" {
			t.Errorf("irq 13 = %s, want 0-3: a record of another boot is dropped without a write", got)
		}
		if rec := record(t, db); rec != nil {
			t.Errorf("record = %+v, want none", rec)
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

// Bad content in an affinity file is refused with the interrupt named,
// and nothing is recorded or written.
func TestBadAffinityChangesNothing(t *testing.T) {
	for _, tc := range []struct{ name, data, msg string }{
		{name: "not a list", data: "ff\n", msg: "irq 15"},
		{name: "empty", data: "\n", msg: "no CPU"},
		{name: "reversed", data: "3-1\n", msg: "invalid cpuset"},
		{name: "too large", data: strings.Repeat("1,", MaxFileSize), msg: "larger than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			irqs := map[int]string{10: "0-7\n", 15: tc.data}
			root, db := fakeRoot(t, irqs), openDB(t)
			if _, err := List(root); !errors.Is(err, ErrBadAffinity) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("List = %v, want %v saying %q", err, ErrBadAffinity, tc.msg)
			}
			if _, err := newSteer(t, db, root, "run", measure.Identity{}, Options{}).Hold("job-0", cpuset.New(4)); err == nil {
				t.Fatal("Hold on a malformed affinity file = nil, want an error")
			}
			if got := affinity(t, root, 10); got != "0-7" {
				t.Errorf("irq 10 after a refused hold = %s, want 0-7", got)
			}
			if rec := record(t, db); rec != nil {
				t.Errorf("record after a refused hold = %+v, want none", rec)
			}
		})
	}
}

func TestProbe(t *testing.T) {
	if err := Probe(fakeRoot(t, machine)); err != nil {
		t.Errorf("Probe of a writable root = %v, want nil", err)
	}
	err := Probe(t.TempDir())
	var pe *ProbeError
	if !errors.Is(err, ErrUnavailable) || !errors.As(err, &pe) || pe.Short != "no /proc/irq" {
		t.Errorf("Probe without proc/irq = %v, want %v with Short %q", err, ErrUnavailable, "no /proc/irq")
	}
	t.Run("not writable", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("root writes a file whatever its mode")
		}
		root := fakeRoot(t, map[int]string{10: "0-7\n"})
		if err := os.Chmod(filepath.Join(root, Dir, "10", AffinityFile), 0o444); err != nil {
			t.Fatal(err)
		}
		if err := Probe(root); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "run as root") {
			t.Errorf("Probe = %v, want %v saying run as root", err, ErrUnavailable)
		}
	})
}

// TestListThisMachine reads the real /proc/irq, read-only.
func TestListThisMachine(t *testing.T) {
	if _, err := os.Stat("/proc/irq"); err != nil {
		t.Skipf("no /proc/irq here: %v", err)
	}
	irqs, err := List("/")
	if err != nil {
		t.Fatalf("List(/) = %v", err)
	}
	for _, q := range irqs {
		if q.Affinity.IsEmpty() {
			t.Errorf("irq %d has an empty affinity", q.N)
		}
	}
}

func TestIrqbalance(t *testing.T) {
	proc := t.TempDir()
	for pid, comm := range map[string]string{"1": "init\n", "42": "irqbalance\n", "self": "x\n"} {
		if err := os.MkdirAll(filepath.Join(proc, pid), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(proc, pid, "comm"), []byte(comm), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if pid, err := Irqbalance(proc); err != nil || pid != 42 {
		t.Errorf("Irqbalance = %d, %v; want 42", pid, err)
	}
	os.RemoveAll(filepath.Join(proc, "42"))
	if pid, err := Irqbalance(proc); err != nil || pid != 0 {
		t.Errorf("Irqbalance without it = %d, %v; want 0", pid, err)
	}
}

func TestParseRecordRefuses(t *testing.T) {
	ok := `{"name":"run","owner":"1-2","id":"j","cpus":"4"}`
	for _, tc := range []struct{ name, in, msg string }{
		{name: "unknown key", in: `{"boot_id":"","prior":[],"holders":[],"x":1}`, msg: "unknown field"},
		{name: "irq twice", in: `{"boot_id":"","prior":[{"irqs":"1-2","affinity":"0"},{"irqs":"2","affinity":"1"}],"holders":[]}`, msg: "recorded twice"},
		{name: "empty affinity", in: `{"boot_id":"","prior":[{"irqs":"1","affinity":""}],"holders":[]}`, msg: "no CPU"},
		{name: "bad set", in: `{"boot_id":"","prior":[{"irqs":"1","affinity":"0","set":"ff"}],"holders":[]}`, msg: "affinity set on irqs 1"},
		{name: "bad owner", in: `{"boot_id":"","prior":[],"holders":[{"name":"run","owner":"x","id":"j","cpus":"4"}]}`, msg: "PID-START"},
		{name: "no id", in: `{"boot_id":"","prior":[],"holders":[{"name":"run","owner":"1-2","id":"","cpus":"4"}]}`, msg: "id"},
		{name: "no cpus", in: `{"boot_id":"","prior":[],"holders":[{"name":"run","owner":"1-2","id":"j","cpus":""}]}`, msg: "cpus"},
		{name: "trailing", in: `{"boot_id":"","prior":[],"holders":[` + ok + `]} {}`, msg: "data after"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ParseRecord([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("ParseRecord = %v, want an error saying %q", err, tc.msg)
			}
		})
	}
}
