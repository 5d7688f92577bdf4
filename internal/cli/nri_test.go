package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestNRIRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	notDB := write("not.db", "hello, not sqlite")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "missing config", args: []string{"--config", filepath.Join(dir, "none.yaml")}, want: "--config"},
		{name: "bad policy", args: []string{"--config", write("p.yaml", "policy: fastest\n")}, want: `policy "fastest"`},
		{name: "reserved beyond the machine", args: []string{"--config", write("r.yaml", "reserved_cpus: \"0-99\"\n"), "--sysfs-root", smallDump(t),
			"--state", filepath.Join(dir, "s.db")}, want: "reserved"},
		{name: "state file not ours", args: []string{"--state", notDB, "--sysfs-root", smallDump(t)}, want: "not.db"},
		{name: "nrt without a node name", args: []string{"--publish-nrt", "--node-name", "", "--sysfs-root", smallDump(t), "--state", filepath.Join(dir, "n.db")}, want: "--node-name"},
		{name: "nrt outside a pod", args: []string{"--publish-nrt", "--node-name", "n1", "--sysfs-root", smallDump(t), "--state", filepath.Join(dir, "o.db")}, want: "not running in a Kubernetes pod"},
		{name: "annotate without a node name", args: []string{"--annotate-node", "--node-name", "", "--sysfs-root", smallDump(t), "--state", filepath.Join(dir, "a.db")}, want: "--annotate-node needs --node-name"},
		{name: "annotate outside a pod", args: []string{"--annotate-node", "--node-name", "n1", "--sysfs-root", smallDump(t), "--state", filepath.Join(dir, "b.db")}, want: "--annotate-node: not running in a Kubernetes pod"},
		{name: "bad sysfs root", args: []string{"--sysfs-root", filepath.Join(dir, "nowhere")}, want: "--sysfs-root"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := os.ReadFile(notDB)
			_, stderr, code := runCLI(t, append([]string{"nri"}, tc.args...)...)
			if code != 2 || !strings.Contains(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
				t.Errorf("corepin nri %v: exit %d, stderr %q; want exit 2 and one line naming %q", tc.args, code, stderr, tc.want)
			}
			if after, _ := os.ReadFile(notDB); string(after) != string(before) {
				t.Errorf("the foreign state file changed")
			}
		})
	}
}
