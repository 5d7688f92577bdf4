package store

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestAdmit(t *testing.T) {
	db := newDB(t)
	t0 := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	a, err := db.Admit("enc-1", func(cur []Assignment) (Assignment, error) {
		if len(cur) != 0 {
			t.Errorf("decide saw %d assignments, want 0", len(cur))
		}
		return Assignment{Name: "ignored", Cpuset: "2-5", QoS: "LSE", Request: raw(`{"cpus":4}`), CreatedAt: t0, Generation: 9}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := Assignment{Name: "enc-1", Cpuset: "2-5", QoS: "LSE", Request: raw(`{"cpus":4}`), CreatedAt: t0, Generation: 1}
	if diff := cmp.Diff(want, a); diff != "" {
		t.Errorf("Admit (-want +got):\n%s", diff)
	}

	called := false
	_, err = db.Admit("enc-1", func([]Assignment) (Assignment, error) { called = true; return Assignment{}, nil })
	if !errors.Is(err, ErrExists) || called {
		t.Errorf("second Admit(enc-1) = %v (decide called: %v), want ErrExists before deciding", err, called)
	}

	rejected := errors.New("no 4 CPUs free on one NUMA node")
	_, err = db.Admit("enc-2", func(cur []Assignment) (Assignment, error) {
		if diff := cmp.Diff([]Assignment{want}, cur); diff != "" {
			t.Errorf("decide saw (-want +got):\n%s", diff)
		}
		return Assignment{}, rejected
	})
	if err != rejected {
		t.Errorf("Admit with a rejecting decide = %v, want its error unwrapped", err)
	}
	_, err = db.Admit("enc-3", func([]Assignment) (Assignment, error) {
		return Assignment{Cpuset: "6", Request: raw("{")}, nil
	})
	if err == nil {
		t.Error("Admit with invalid request JSON succeeded")
	}
	got, err := db.Assignments()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Assignment{want}, got); diff != "" {
		t.Errorf("Assignments after refused admits (-want +got):\n%s", diff)
	}
}

func TestSaveAssignmentGenerations(t *testing.T) {
	db := newDB(t)
	t0 := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	steps := []struct {
		name    string
		a       Assignment
		wantGen int64
		wantErr error
	}{
		{name: "insert", a: Assignment{Name: "w", Cpuset: "0-1", QoS: "LS", CreatedAt: t0}, wantGen: 1},
		{name: "blind update", a: Assignment{Name: "w", Cpuset: "0-3", QoS: "LS"}, wantGen: 2},
		{name: "update at current generation", a: Assignment{Name: "w", Cpuset: "0-5", QoS: "LS", Generation: 2}, wantGen: 3},
		{name: "stale generation", a: Assignment{Name: "w", Cpuset: "7", QoS: "LS", Generation: 2}, wantErr: ErrConflict},
		{name: "generation of a missing row", a: Assignment{Name: "x", Cpuset: "7", QoS: "BE", Generation: 1}, wantErr: ErrNotFound},
	}
	for _, s := range steps {
		gen, err := db.SaveAssignment(s.a)
		if s.wantErr != nil {
			if !errors.Is(err, s.wantErr) {
				t.Errorf("%s: SaveAssignment = %d, %v, want %v", s.name, gen, err, s.wantErr)
			}
			continue
		}
		if err != nil || gen != s.wantGen {
			t.Errorf("%s: SaveAssignment = %d, %v, want %d", s.name, gen, err, s.wantGen)
		}
	}
	got, err := db.Assignments()
	if err != nil {
		t.Fatal(err)
	}
	want := []Assignment{{Name: "w", Cpuset: "0-5", QoS: "LS", CreatedAt: t0, Generation: 3}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Assignments (-want +got):\n%s", diff)
	}
	if err := db.DeleteAssignment("w"); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteAssignment("w"); !errors.Is(err, ErrNotFound) {
		t.Errorf("second DeleteAssignment = %v, want ErrNotFound", err)
	}
	if got, _ := db.Assignments(); len(got) != 0 {
		t.Errorf("Assignments after delete = %v, want none", got)
	}
}

// TestAdmitNeverDoubleAssigns has two handles on one file, as two agent
// processes would, admit workloads concurrently, each taking the lowest CPU
// that decide sees free. Every CPU must be handed out exactly once.
func TestAdmitNeverDoubleAssigns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	dbs := []*DB{openT(t, path), openT(t, path)}
	const n = 40
	decide := func(cur []Assignment) (Assignment, error) {
		used := map[string]bool{}
		for _, a := range cur {
			used[a.Cpuset] = true
		}
		for cpu := 0; ; cpu++ {
			if s := strconv.Itoa(cpu); !used[s] {
				return Assignment{Cpuset: s, QoS: "LSE"}, nil
			}
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			if _, err := dbs[i%2].Admit(fmt.Sprintf("w%02d", i), decide); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	as, err := dbs[0].Assignments()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, a := range as {
		if other, ok := seen[a.Cpuset]; ok {
			t.Errorf("CPU %s assigned to both %s and %s", a.Cpuset, other, a.Name)
		}
		seen[a.Cpuset] = a.Name
	}
	if len(as) != n {
		t.Errorf("%d assignments, want %d", len(as), n)
	}
}
