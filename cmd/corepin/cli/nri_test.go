package cli

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corepin/corepin/kube/kubeclient"
	"github.com/corepin/corepin/kube/nodestate"
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
		{name: "relative info dir", args: []string{"--info-dir", "run/corepin", "--sysfs-root", smallDump(t), "--state", filepath.Join(dir, "i.db")}, want: `info dir "run/corepin"`},
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

// TestNRIPublisherFromKubeconfig: a plugin run on the host reaches the API
// server through --kubeconfig and --context (token, CA) and patches its
// node; without them it needs a pod's service account.
func TestNRIPublisherFromKubeconfig(t *testing.T) {
	var got []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got = append(got, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization")+" "+r.Header.Get("Content-Type")+" "+string(body))
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"kind":"Node","apiVersion":"v1","metadata":{"name":"n1"}}`)
	}))
	defer srv.Close()
	kc := writeKubeconfig(t, srv)
	pub, err := publisher(kubeclient.Options{Kubeconfig: kc, Context: "sweep"})
	if err != nil {
		t.Fatal(err)
	}
	v := "[4,0]"
	if err := pub.AnnotateNode(context.Background(), "n1", nodestate.Annotations{"corepin.io/numa-free": &v}); err != nil {
		t.Fatalf("AnnotateNode: %v", err)
	}
	if len(got) != 1 || !strings.HasPrefix(got[0], "PATCH /api/v1/nodes/n1 Bearer sweep-token application/merge-patch+json ") ||
		!strings.Contains(got[0], `"corepin.io/numa-free":"[4,0]"`) {
		t.Errorf("requests %q, want one merge patch of node n1 with the context's token", got)
	}
	if _, err := publisher(kubeclient.Options{Kubeconfig: filepath.Join(t.TempDir(), "missing")}); err == nil {
		t.Error("a missing kubeconfig gave a publisher")
	}
}
