package agent

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/nodecore"
)

// tinyDisk mounts a 1 MiB tmpfs on a fresh directory until t ends.
func tinyDisk(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=1m,mode=0700"); err != nil {
		t.Skipf("skipping: mounting a tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmounting %s: %v", dir, err)
		}
	})
	return dir
}

// fill writes file in dir until its disk is full.
func fill(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "fill")
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, size := range []int{64 << 10, 4 << 10, 1} {
		buf := make([]byte, size)
		for {
			if _, err := f.Write(buf); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatal(err)
				}
				break
			}
		}
	}
	return p
}

// TestDeleteOnAFullDisk (issue 17 §5): a delete on a full disk killed the
// workload, answered 500 and kept it listed. The delete is committed
// first: on a full disk nothing changes, the workload keeps running in
// its group, the answer (507) says the disk is full; once space is freed
// the same delete works. An admission on the full disk changes nothing
// either.
func TestDeleteOnAFullDisk(t *testing.T) {
	requireCgroups(t)
	disk := tinyDisk(t)
	root := testRoot(t)
	n, err := openNode(t, root, filepath.Join(disk, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	for _, s := range []Spec{
		{Name: "victim", QoS: "LSE", CPUs: f64(1), Command: "sleep", Args: []string{"600"}},
		{Name: "other", QoS: "LS", CPUs: f64(0.2), Command: "sleep", Args: []string{"600"}},
	} {
		if _, err := n.Create(s); err != nil {
			t.Fatal(err)
		}
	}
	victim := readPids(groupDir(t, root, "victim"))
	before, liveBefore := n.List(), liveGroups(t, root)
	full := fill(t, disk)

	err = n.Delete("victim")
	if !errors.Is(err, ErrDiskFull) || statusOf(err) != http.StatusInsufficientStorage || !strings.Contains(err.Error(), "keeps running") {
		t.Errorf("Delete on a full disk = %v (status %d), want ErrDiskFull (507) saying it keeps running", err, statusOf(err))
	}
	_, err = n.Create(Spec{Name: "new", QoS: "LS", CPUs: f64(0.1), Command: "sleep", Args: []string{"600"}})
	if !errors.Is(err, ErrDiskFull) || statusOf(err) != http.StatusInsufficientStorage {
		t.Errorf("Create on a full disk = %v (status %d), want ErrDiskFull (507)", err, statusOf(err))
	}
	if d := cmp.Diff(before, n.List()); d != "" {
		t.Errorf("state changed (-before +after):\n%s", d)
	}
	if d := cmp.Diff(liveBefore, liveGroups(t, root)); d != "" {
		t.Errorf("live groups changed (-before +after):\n%s", d)
	}
	for _, p := range victim {
		if err := syscall.Kill(p, 0); err != nil {
			t.Errorf("victim's process %d: %v; want it running", p, err)
		}
	}

	// A restart on the full disk adopts it as it was.
	n.Close()
	n2, err := openNode(t, root, filepath.Join(disk, "state.db"))
	if err != nil {
		t.Fatalf("reopening on the full disk: %v", err)
	}
	t.Cleanup(func() { n2.Close() })
	n = n2
	checkConsistent(t, root, n.List())

	if err := os.Remove(full); err != nil {
		t.Fatal(err)
	}
	if err := n.Delete("victim"); err != nil {
		t.Fatalf("Delete once space is freed: %v", err)
	}
	ws := n.List()
	if len(ws) != 1 || ws[0].Name != "other" {
		t.Errorf("workloads after the delete: %+v, want only other", ws)
	}
	checkConsistent(t, root, ws)
}

// TestRestartFinishesACommittedDelete: an agent that stops between
// committing a delete and stopping the workload (a crash) leaves it
// running; the next start stops it, removes its group and releases it.
func TestRestartFinishesACommittedDelete(t *testing.T) {
	n, root := newNode(t)
	for _, s := range []Spec{
		{Name: "gone", QoS: "LSE", CPUs: f64(1), Command: "sleep", Args: []string{"600"}},
		{Name: "kept", QoS: "LS", CPUs: f64(0.2), Command: "sleep", Args: []string{"600"}},
	} {
		if _, err := n.Create(s); err != nil {
			t.Fatal(err)
		}
	}
	pids := readPids(groupDir(t, root, "gone"))
	// The delete committed (the record's deleting mark), then the agent
	// stopped: nothing else of the delete happened.
	state := n.StatePath()
	n.Close()
	markDeleting(t, state, "gone")
	n2, err := openNode(t, root, state)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n2.Close() })
	ws := n2.List()
	if len(ws) != 1 || ws[0].Name != "kept" {
		t.Errorf("workloads after the restart: %+v, want only kept", ws)
	}
	checkConsistent(t, root, ws)
	for _, p := range pids {
		// Killed, it stays a zombie: this test process was its parent.
		if st, err := procState(p); err == nil && st != 'Z' {
			t.Errorf("process %d of the deleted workload still runs (state %c)", p, st)
		}
	}
}

// markDeleting commits workload name's delete in the state file, as
// Node.Delete does before it stops anything.
func markDeleting(t *testing.T, state, name string) {
	t.Helper()
	as, db := assignmentsIn(t, state)
	for _, a := range as {
		if a.Name != name {
			continue
		}
		rec, _, err := nodecore.DecodeAssignment(a)
		if err != nil {
			t.Fatal(err)
		}
		rec.Deleting = true
		if a.Request, err = json.Marshal(rec); err != nil {
			t.Fatal(err)
		}
		if _, err := db.SaveAssignment(a); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("no workload %s in %s", name, state)
}

// TestReconcileOnAFullDiskKeepsListingWhatItCanNotRelease (issue 27 §2):
// a reconcile whose workload is gone but whose release the state file
// refuses (a full disk) dropped it from the list while the file kept it,
// its CPUs held by nobody listed. It stays listed until a sweep, once
// space is freed, releases it in both.
func TestReconcileOnAFullDiskKeepsListingWhatItCanNotRelease(t *testing.T) {
	requireCgroups(t)
	disk := tinyDisk(t)
	root := testRoot(t)
	state := filepath.Join(disk, "state.db")
	n, err := openNode(t, root, state)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	pid := startSleep(t)
	for _, s := range []Spec{
		{Name: "gone", QoS: "LS", CPUs: f64(0.2), PID: pid},
		{Name: "stays", QoS: "LS", CPUs: f64(0.2), Command: "sleep", Args: []string{"600"}},
	} {
		if _, err := n.Create(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	gone := groupDir(t, root, "gone")
	for deadline := time.Now().Add(30 * time.Second); len(readPids(gone)) > 0; {
		if time.Now().After(deadline) {
			t.Fatalf("the killed process %d is still in %s", pid, gone)
		}
		time.Sleep(10 * time.Millisecond) // the killed process leaves its group
	}
	full := fill(t, disk)
	if _, err := n.Reconcile(); err == nil || !strings.Contains(err.Error(), `releasing "gone"`) {
		t.Errorf("Reconcile on a full disk = %v, want the release of gone refused", err)
	}
	ws := n.List()
	checkStored(t, state, ws)
	if names := namesOf(ws); !cmp.Equal(names, []string{"gone", "stays"}) {
		t.Errorf("listed on the full disk: %v, want gone and stays (the file holds both)", names)
	}
	if err := os.Remove(full); err != nil {
		t.Fatal(err)
	}
	if released, err := n.Sweep(); err != nil || !cmp.Equal(released, []string{"gone"}) {
		t.Errorf("Sweep once space is freed = %v, %v; want gone released", released, err)
	}
	ws = n.List()
	checkStored(t, state, ws)
	if names := namesOf(ws); !cmp.Equal(names, []string{"stays"}) {
		t.Errorf("listed after the sweep: %v, want stays", names)
	}
}

func namesOf(ws []Workload) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.Name)
	}
	return out
}
