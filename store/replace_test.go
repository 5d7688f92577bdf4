package store

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestReplace(t *testing.T) {
	db := newDB(t)
	t0 := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	for _, a := range []Assignment{{Name: "a", Cpuset: "0-1", QoS: "LSE", CreatedAt: t0}, {Name: "b", Cpuset: "2", QoS: "LSE", CreatedAt: t0}} {
		if _, err := db.SaveAssignment(a); err != nil {
			t.Fatal(err)
		}
	}
	got, err := db.Replace("a", func(cur []Assignment, old Assignment) (Assignment, error) {
		if len(cur) != 2 || old.Name != "a" || old.Cpuset != "0-1" {
			t.Errorf("decide saw %d assignments and old %+v; want 2 and a at 0-1", len(cur), old)
		}
		return Assignment{Name: "ignored", Cpuset: "0-1,3-4", QoS: "LSE", Request: raw(`{"cpus":4}`), Generation: 9}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := Assignment{Name: "a", Cpuset: "0-1,3-4", QoS: "LSE", Request: raw(`{"cpus":4}`), CreatedAt: t0, Generation: 2}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Replace (-want +got):\n%s", diff)
	}
	refused := errors.New("does not fit")
	if _, err := db.Replace("a", func([]Assignment, Assignment) (Assignment, error) { return Assignment{}, refused }); err != refused {
		t.Errorf("Replace with a refusing decide = %v, want its error unwrapped", err)
	}
	if _, err := db.Replace("nobody", func([]Assignment, Assignment) (Assignment, error) { return Assignment{}, nil }); !errors.Is(err, ErrNotFound) {
		t.Errorf("Replace(nobody) = %v, want ErrNotFound", err)
	}
	all, err := db.Assignments()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Assignment{want, {Name: "b", Cpuset: "2", QoS: "LSE", CreatedAt: t0, Generation: 1}}, all); diff != "" {
		t.Errorf("Assignments after Replace (-want +got):\n%s", diff)
	}
}
