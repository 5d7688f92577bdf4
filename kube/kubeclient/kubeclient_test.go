package kubeclient

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const kubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: a
  cluster: {server: "https://a.example:6443"}
- name: b
  cluster: {server: "https://b.example:6443"}
users:
- name: u
  user: {token: t}
contexts:
- name: ctx-a
  context: {cluster: a, user: u, namespace: bench}
- name: ctx-b
  context: {cluster: b, user: u}
current-context: ctx-a
`

func TestLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name            string
		o               Options
		host, namespace string
	}{
		{name: "current context", o: Options{Kubeconfig: path}, host: "https://a.example:6443", namespace: "bench"},
		{name: "other context, no namespace", o: Options{Kubeconfig: path, Context: "ctx-b"}, host: "https://b.example:6443", namespace: "default"},
		{name: "namespace flag wins", o: Options{Kubeconfig: path, Namespace: "mine"}, host: "https://a.example:6443", namespace: "mine"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(tc.o)
			if err != nil {
				t.Fatalf("Load() error = %v", err)
			}
			if c.Host != tc.host || c.Namespace != tc.namespace || c.core == nil || c.batch == nil || c.Dynamic == nil {
				t.Errorf("Load() = host %q namespace %q, want %q and %q with both clients", c.Host, c.Namespace, tc.host, tc.namespace)
			}
		})
	}
	t.Run("via $KUBECONFIG", func(t *testing.T) {
		t.Setenv("KUBECONFIG", path)
		c, err := Load(Options{})
		if err != nil || c.Namespace != "bench" {
			t.Errorf("Load() = %+v, %v; want the $KUBECONFIG context's namespace bench", c, err)
		}
	})
	t.Run("unknown context", func(t *testing.T) {
		if _, err := Load(Options{Kubeconfig: path, Context: "nope"}); err == nil || !strings.Contains(err.Error(), "nope") {
			t.Errorf("Load() error = %v, want one naming the context", err)
		}
	})
	t.Run("nothing to load", func(t *testing.T) {
		t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "absent"))
		t.Setenv("HOME", t.TempDir())
		t.Setenv("KUBERNETES_SERVICE_HOST", "")
		if _, err := Load(Options{}); !errors.Is(err, ErrNoConfig) {
			t.Errorf("Load() error = %v, want ErrNoConfig", err)
		}
	})
}
