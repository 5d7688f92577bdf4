package measure

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"testing"
)

func TestIdentityOfSelfAndDead(t *testing.T) {
	self, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	if self.PID != os.Getpid() || self.Start == 0 {
		t.Fatalf("Self() = %+v, want pid %d and a start time", self, os.Getpid())
	}
	if !self.Alive("/proc") {
		t.Errorf("%v.Alive() = false for this process", self)
	}
	// Same pid, another start time: a reused pid is another process.
	if (Identity{PID: self.PID, Start: self.Start + 1}).Alive("/proc") {
		t.Errorf("an identity with another start time counts as alive")
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := Identity{PID: cmd.Process.Pid, Start: 1}
	if _, err := IdentityOf("/proc", dead.PID); err == nil {
		t.Skip("pid reused already")
	} else if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("IdentityOf(reaped pid) error = %v, want fs.ErrNotExist", err)
	}
	if dead.Alive("/proc") {
		t.Errorf("reaped process %v counts as alive", dead)
	}
}

func TestParseIdentity(t *testing.T) {
	tests := []struct {
		in   string
		want Identity
		ok   bool
	}{
		{in: "42-1234", want: Identity{42, 1234}, ok: true},
		{in: "42-0", want: Identity{42, 0}, ok: true},
		{in: "0-5"}, {in: "-5"}, {in: "042-5"}, {in: "42-05"}, {in: "42"}, {in: "42-x"}, {in: "42--5"}, {in: ""},
	}
	for _, tc := range tests {
		got, err := ParseIdentity(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseIdentity(%q) = %v, %v; want %v, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
		if tc.ok && got.String() != tc.in {
			t.Errorf("ParseIdentity(%q).String() = %q", tc.in, got.String())
		}
	}
}

func FuzzParseIdentity(f *testing.F) {
	f.Add("42-1234")
	f.Add("1-0")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseIdentity(s)
		if err == nil && id.String() != s {
			t.Fatalf("ParseIdentity(%q).String() = %q", s, id.String())
		}
	})
}

// A fake /proc: a command name with spaces and parentheses, as a process
// may choose, must not shift the fields.
func TestIdentityOfRoot(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(dir+"/7", 0o755); err != nil {
		t.Fatal(err)
	}
	stat := "7 (a) b (c) S 1 7 7 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 424242 1000 10 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
	if err := os.WriteFile(dir+"/7/stat", []byte(stat), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := IdentityOf(dir, 7)
	if err != nil || got != (Identity{PID: 7, Start: 424242}) {
		t.Errorf("IdentityOf = %v, %v; want 7-424242", got, err)
	}
	if !(Identity{7, 424242}).Alive(dir) || (Identity{7, 1}).Alive(dir) || (Identity{8, 1}).Alive(dir) {
		t.Error("Alive() wrong for same, reused and missing pid")
	}
}
