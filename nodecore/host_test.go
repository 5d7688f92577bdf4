package nodecore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/topology"
)

// Issue 10 §2: without $COREPIN_STATE and before any agent ran, two runs
// each used their own allocator and pinned jobs onto the same CPU. Every
// run now finds one shared state file.
func TestSharedState(t *testing.T) {
	dir := t.TempDir()
	ro := filepath.Join(dir, "ro")
	if err := os.Mkdir(ro, 0o555); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, env, system, user, want string
	}{
		{name: "env wins", env: "/x/s.db", system: filepath.Join(dir, "sys", "agent.db"), want: "/x/s.db"},
		{name: "agent's, directory created", system: filepath.Join(dir, "sys", "agent.db"), user: filepath.Join(dir, "u", "state.db"),
			want: filepath.Join(dir, "sys", "agent.db")},
		{name: "no system path", user: filepath.Join(dir, "u2", "state.db"), want: filepath.Join(dir, "u2", "state.db")},
		{name: "none", want: ""},
	}
	if os.Geteuid() != 0 { // root writes a 0555 directory anyway
		tests = append(tests, struct{ name, env, system, user, want string }{
			name: "system not writable: the user's", system: filepath.Join(ro, "sub", "agent.db"), user: filepath.Join(dir, "u3", "state.db"),
			want: filepath.Join(dir, "u3", "state.db")})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := SharedState(tc.env, tc.system, tc.user); got != tc.want {
				t.Errorf("SharedState(%q, %q, %q) = %q, want %q", tc.env, tc.system, tc.user, got, tc.want)
			}
			if tc.want != "" && tc.env == "" {
				if fi, err := os.Stat(filepath.Dir(tc.want)); err != nil || !fi.IsDir() {
					t.Errorf("directory of %s not created: %v", tc.want, err)
				}
			}
		})
	}
}

func TestCutWords(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"no cpu.idle (Linux < 5.15): Idle is approximated by cpu.shares=2", "no cpu.idle"},
		{"no cpuacct hierarchy: Stats reports no CPU usage", "no cpuacct hierarchy"},
		{"plain", "plain"},
	} {
		if got := cutWords(tc.in); got != tc.want || strings.Contains(got, ":") {
			t.Errorf("cutWords(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// SetUpHost gives a batch the shared state file's placer: a pinned job's
// CPUs are a reservation in that file, owned by this process, and Close
// lets the file go. A Check that refuses the driver stops the set-up.
func TestSetUpHostSharesTheStateFile(t *testing.T) {
	topo, err := topology.Discover(os.DirFS("/"))
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(t.TempDir(), "state.db")
	refused := errors.New("refused")
	if _, err := SetUpHost(context.Background(), topo, HostOptions{Driver: enforce.NameAffinity, Placer: true, State: state,
		Check: func(enforce.Driver) error { return refused }}); !errors.Is(err, refused) {
		t.Fatalf("SetUpHost with a refusing Check = %v, want its error", err)
	}
	if _, err := os.Stat(state); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused set-up made the state file (%v)", err)
	}
	h, err := SetUpHost(context.Background(), topo, HostOptions{Driver: enforce.NameAffinity, Placer: true, State: state})
	if err != nil {
		t.Fatal(err)
	}
	if h.Driver.Name() != enforce.NameAffinity || !h.Pool.Equals(alloc.SharedCPUs(topo)) || h.OnGroup != nil {
		t.Errorf("host = driver %s, pool %v, QoS hook %v; want affinity, %v, none", h.Driver.Name(), h.Pool, h.OnGroup != nil, alloc.SharedCPUs(topo))
	}
	p, err := h.Placer.Place("job-0", 1)
	if err != nil {
		t.Fatal(err)
	}
	db, err := OpenState(state)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	as, err := db.Assignments()
	if err != nil || len(as) != 1 || as[0].Cpuset != p.CPUs.String() {
		t.Fatalf("state after Place = %+v (%v), want one reservation of %v", as, err, p.CPUs)
	}
	if rec, _, _ := DecodeAssignment(as[0]); rec.Owner == nil || rec.Owner.PID != os.Getpid() || rec.Job != "job-0" {
		t.Errorf("reservation record %+v, want job-0 owned by this process", rec)
	}
	if err := h.Placer.Release("job-0"); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Errorf("Close = %v", err)
	}
}
