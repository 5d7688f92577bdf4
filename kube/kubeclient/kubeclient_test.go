package kubeclient

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
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

// TestListClusterObjects lists a custom resource from an API server: one
// page as asked (limit, continue), the objects unstructured.
func TestListClusterObjects(t *testing.T) {
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.URL.Path + "?" + r.URL.RawQuery
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"apiVersion":"topology.node.k8s.io/v1alpha2","kind":"NodeResourceTopologyList","metadata":{"continue":"next"},
"items":[{"apiVersion":"topology.node.k8s.io/v1alpha2","kind":"NodeResourceTopology","metadata":{"name":"n1"},"zones":[]}]}`)
	}))
	c := serverClient(t, srv)
	res := schema.GroupVersionResource{Group: "topology.node.k8s.io", Version: "v1alpha2", Resource: "noderesourcetopologies"}
	list, err := c.ListClusterObjects(context.Background(), res, metav1.ListOptions{Limit: 2, Continue: "abc"})
	if err != nil {
		t.Fatalf("ListClusterObjects() error = %v", err)
	}
	if want := "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies?continue=abc&limit=2"; got != want {
		t.Errorf("request %q, want %q", got, want)
	}
	var names []string
	for _, u := range list.Items {
		names = append(names, u.GetName())
	}
	if len(names) != 1 || names[0] != "n1" || list.GetContinue() != "next" {
		t.Errorf("ListClusterObjects() = items %q, continue %q; want [n1] and next", names, list.GetContinue())
	}
}

// TestJobWrites creates, reads and deletes a Job on an API server: the
// paths and verbs kubectl's own use, strict field validation on create,
// the propagation policy in the delete's body and the client's Timeout on
// every request.
func TestJobWrites(t *testing.T) {
	type request struct{ Method, URL, Body string }
	var got []request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got = append(got, request{r.Method, r.URL.Path + "?" + r.URL.RawQuery, string(body)})
		w.Header().Set("Content-Type", "application/json")
		switch r.Method {
		case http.MethodDelete:
			io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Success"}`)
		case http.MethodGet:
			io.WriteString(w, `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j1","namespace":"bench"},"status":{"succeeded":2}}`)
		default:
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j1","namespace":"bench","uid":"u1"}}`)
		}
	}))
	c := serverClient(t, srv)
	ctx := context.Background()
	created, err := c.CreateJob(ctx, "bench", &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j1"}}, metav1.CreateOptions{FieldValidation: "Strict"})
	if err != nil || created.UID != "u1" {
		t.Fatalf("CreateJob() = %+v, %v; want the stored Job (uid u1)", created, err)
	}
	j, err := c.GetJob(ctx, "bench", "j1")
	if err != nil || j.Status.Succeeded != 2 {
		t.Fatalf("GetJob() = %+v, %v; want 2 succeeded", j, err)
	}
	bg := metav1.DeletePropagationBackground
	if err := c.DeleteJob(ctx, "bench", "j1", metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		t.Fatalf("DeleteJob() error = %v", err)
	}
	if len(got) != 3 {
		t.Fatalf("requests %+v, want 3", got)
	}
	want := []request{
		{http.MethodPost, "/apis/batch/v1/namespaces/bench/jobs?fieldValidation=Strict&timeout=30s", ""},
		{http.MethodGet, "/apis/batch/v1/namespaces/bench/jobs/j1?timeout=30s", ""},
		{http.MethodDelete, "/apis/batch/v1/namespaces/bench/jobs/j1?timeout=30s", ""},
	}
	for i := range want {
		if got[i].Method != want[i].Method || got[i].URL != want[i].URL {
			t.Errorf("request %d = %s %s, want %s %s", i, got[i].Method, got[i].URL, want[i].Method, want[i].URL)
		}
	}
	if !strings.Contains(got[0].Body, `"name":"j1"`) {
		t.Errorf("create body %q, want the Job", got[0].Body)
	}
	if !strings.Contains(got[2].Body, `"propagationPolicy":"Background"`) {
		t.Errorf("delete body %q, want propagationPolicy Background", got[2].Body)
	}
}

// serverClient is a Client of the API server srv (closed when the test
// ends), through a kubeconfig naming it.
func serverClient(t *testing.T, srv *httptest.Server) *Client {
	t.Helper()
	t.Cleanup(srv.Close)
	path := filepath.Join(t.TempDir(), "config")
	cfg := strings.Replace(kubeconfig, "https://a.example:6443", srv.URL, 1)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(Options{Kubeconfig: path})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
