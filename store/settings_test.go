package store

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSettings(t *testing.T) {
	db := newDB(t)
	if _, err := db.LoadSetting("alloc"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("LoadSetting of a missing key = %v, want ErrNotFound", err)
	}
	if err := db.SaveSetting("alloc", raw(`{"reserved_cpus":"0"}`)); err != nil {
		t.Fatal(err)
	}
	first, err := db.LoadSetting("alloc")
	if err != nil {
		t.Fatal(err)
	}
	if string(first.Value) != `{"reserved_cpus":"0"}` || first.UpdatedAt.IsZero() {
		t.Errorf("LoadSetting = %+v, want the saved value and a time", first)
	}
	// The last writer wins.
	if err := db.SaveSetting("alloc", raw(`{"reserved_cpus":"0-1"}`)); err != nil {
		t.Fatal(err)
	}
	second, err := db.LoadSetting("alloc")
	if err != nil {
		t.Fatal(err)
	}
	if string(second.Value) != `{"reserved_cpus":"0-1"}` || second.UpdatedAt.Before(first.UpdatedAt) {
		t.Errorf("LoadSetting after a second save = %+v, want the second value, updated at or after %v", second, first.UpdatedAt)
	}
	// Bad input changes nothing.
	for _, tc := range []struct {
		name, key, value, msg string
	}{
		{name: "empty key", key: "", value: `{}`, msg: "key is empty"},
		{name: "long key", key: strings.Repeat("k", MaxSettingKey+1), value: `{}`, msg: "longer than"},
		{name: "empty value", key: "alloc", value: ``, msg: "want 1 to"},
		{name: "big value", key: "alloc", value: `"` + strings.Repeat("v", MaxSettingValue) + `"`, msg: "want 1 to"},
		{name: "not JSON", key: "alloc", value: `{`, msg: "not valid JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := db.SaveSetting(tc.key, raw(tc.value))
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("SaveSetting = %v, want an error saying %q", err, tc.msg)
			}
			got, err := db.LoadSetting("alloc")
			if err != nil || string(got.Value) != `{"reserved_cpus":"0-1"}` {
				t.Errorf("after a refused save: %+v (%v), want the value unchanged", got, err)
			}
		})
	}
}

// A file of schema 2 (before settings) gains the table, keeping its
// assignments.
func TestMigrateSchema2Settings(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v2.db")
	func() {
		replace(t, &migrations, migrations[:2])
		db := openT(t, path)
		if _, err := db.SaveAssignment(Assignment{Name: "enc-1", Cpuset: "1", QoS: "LSE"}); err != nil {
			t.Fatal(err)
		}
		db.Close()
	}()
	replace(t, &migrations, migrations[:SchemaVersion:SchemaVersion])
	db := openT(t, path)
	if err := db.SaveSetting("alloc", raw(`{}`)); err != nil {
		t.Fatalf("SaveSetting on a migrated file = %v", err)
	}
	as, err := db.Assignments()
	if err != nil || len(as) != 1 || as[0].Name != "enc-1" {
		t.Errorf("Assignments after migrating = %+v (%v), want enc-1 kept", as, err)
	}
}

func TestReleaseAssignments(t *testing.T) {
	db := newDB(t)
	for _, n := range []string{"a", "b", "c"} {
		if _, err := db.SaveAssignment(Assignment{Name: n, Cpuset: "1", QoS: "LSE"}); err != nil {
			t.Fatal(err)
		}
	}
	names := func() []string {
		as, err := db.Assignments()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, a := range as {
			out = append(out, a.Name)
		}
		return out
	}
	// A refusal from pick, or a name that is not there, deletes nothing.
	no := errors.New("no")
	if _, err := db.ReleaseAssignments(func([]Assignment) ([]string, error) { return []string{"a"}, no }); err != no {
		t.Errorf("ReleaseAssignments with a failing pick = %v, want its error", err)
	}
	if _, err := db.ReleaseAssignments(func([]Assignment) ([]string, error) { return []string{"a", "zz"}, nil }); !errors.Is(err, ErrNotFound) {
		t.Errorf("ReleaseAssignments of a missing name = %v, want ErrNotFound", err)
	}
	if diff := cmp.Diff([]string{"a", "b", "c"}, names()); diff != "" {
		t.Fatalf("after refused releases (-want +got):\n%s", diff)
	}
	var seen []string
	got, err := db.ReleaseAssignments(func(cur []Assignment) ([]string, error) {
		for _, a := range cur {
			seen = append(seen, a.Name)
		}
		return []string{"c", "a", "c"}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "c" || got[1].Name != "a" || got[0].Cpuset != "1" {
		t.Errorf("ReleaseAssignments = %+v, want c and a as they were", got)
	}
	if diff := cmp.Diff([]string{"a", "b", "c"}, seen); diff != "" {
		t.Errorf("pick saw (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"b"}, names()); diff != "" {
		t.Errorf("after releasing (-want +got):\n%s", diff)
	}
}

// A results file of schema 2 (written by the corepin before settings)
// opens read-only as it is: reading results needs nothing migration 3
// added, and reading never writes. A file of schema 1 lacks the runs'
// owner and still needs an upgrade.
func TestOpenReadOnlyReadsOlderResults(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, version int) string {
		path := filepath.Join(dir, name)
		replace(t, &migrations, migrations[:version])
		db := openT(t, path)
		if version >= 2 { // this binary's BeginRun writes the owner of schema 2
			id, err := db.BeginRun(Run{Command: "bench"})
			if err == nil {
				err = db.AddJob(id, Job{Job: 0, Cmd: "true", Mode: "pinned", QoS: "LSE", CPUs: 1})
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		db.Close()
		replace(t, &migrations, migrations[:SchemaVersion:SchemaVersion])
		return path
	}
	v2 := write("v2.db", 2)
	v1 := write("v1.db", 1)

	db, err := OpenReadOnly(v2)
	if err != nil {
		t.Fatalf("OpenReadOnly of a schema-2 file = %v, want it read as it is", err)
	}
	runs, err := db.Runs(RunFilter{})
	if err != nil || len(runs) != 1 {
		t.Fatalf("Runs = %+v (%v), want the one run", runs, err)
	}
	jobs, err := db.Jobs(runs[0].ID)
	if err != nil || len(jobs) != 1 {
		t.Errorf("Jobs = %+v (%v), want the one job", jobs, err)
	}
	db.Close()
	check, err := Open(v2) // a writer migrates it afterwards, as before
	if err != nil {
		t.Fatal(err)
	}
	if v, err := check.userVersion(); err != nil || v != SchemaVersion {
		t.Errorf("after a writer opened it: schema %d (%v), want %d", v, err, SchemaVersion)
	}
	check.Close()

	if _, err := OpenReadOnly(v1); !errors.Is(err, ErrReadOnly) {
		t.Errorf("OpenReadOnly of a schema-1 file = %v, want ErrReadOnly", err)
	}
}

func TestUpdateSetting(t *testing.T) {
	db := newDB(t)
	load := func() string {
		t.Helper()
		s, err := db.LoadSetting("k")
		if errors.Is(err, ErrNotFound) {
			return "<none>"
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(s.Value)
	}
	steps := []struct {
		name    string
		wantOld string // what update is handed, "<nil>" for no setting
		give    string // what it returns ("" deletes)
		err     error
		want    string // stored after
	}{
		{name: "insert", wantOld: "<nil>", give: `{"n":1}`, want: `{"n":1}`},
		{name: "unchanged", wantOld: `{"n":1}`, give: `{"n":1}`, want: `{"n":1}`},
		{name: "replace", wantOld: `{"n":1}`, give: `{"n":2}`, want: `{"n":2}`},
		{name: "error keeps the value", wantOld: `{"n":2}`, give: `{"n":3}`, err: errors.New("no"), want: `{"n":2}`},
		{name: "not JSON is refused", wantOld: `{"n":2}`, give: `{`, want: `{"n":2}`},
		{name: "delete", wantOld: `{"n":2}`, give: "", want: "<none>"},
		{name: "delete of nothing", wantOld: "<nil>", give: "", want: "<none>"},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			err := db.UpdateSetting("k", func(old json.RawMessage) (json.RawMessage, error) {
				got := "<nil>"
				if old != nil {
					got = string(old)
				}
				if got != st.wantOld {
					t.Errorf("update was handed %s, want %s", got, st.wantOld)
				}
				if st.give == "" {
					return nil, st.err
				}
				return json.RawMessage(st.give), st.err
			})
			if st.err != nil && !errors.Is(err, st.err) {
				t.Errorf("UpdateSetting = %v, want %v", err, st.err)
			}
			if got := load(); got != st.want {
				t.Errorf("stored %s, want %s", got, st.want)
			}
		})
	}
}
