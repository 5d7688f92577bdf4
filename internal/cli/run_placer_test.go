package cli

import (
	"os"
	"path/filepath"
	"testing"
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
			if got := sharedState(tc.env, tc.system, tc.user); got != tc.want {
				t.Errorf("sharedState(%q, %q, %q) = %q, want %q", tc.env, tc.system, tc.user, got, tc.want)
			}
			if tc.want != "" && tc.env == "" {
				if fi, err := os.Stat(filepath.Dir(tc.want)); err != nil || !fi.IsDir() {
					t.Errorf("directory of %s not created: %v", tc.want, err)
				}
			}
		})
	}
}
