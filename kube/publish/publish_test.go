package publish

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/kube/nodestate"
	"github.com/corepin/corepin/topology"
)

const nrtPath = "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies"

// fakeAPI is an API server holding NodeResourceTopology objects and
// Nodes' annotations; fail, when set, answers a request first.
type fakeAPI struct {
	mu    sync.Mutex
	objs  map[string]map[string]any
	nodes map[string]map[string]any
	reqs  []string
	fail  func(r *http.Request) (code int, body string)
}

func newFakeAPI(t *testing.T) (*fakeAPI, *httptest.Server) {
	api := &fakeAPI{objs: map[string]map[string]any{}, nodes: map[string]map[string]any{"n1": {"other": "kept"}}}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return api, srv
}

// status is the API server's Status body of a failure.
func status(code int, reason string) string {
	return fmt.Sprintf(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":%q,"code":%d}`, reason, code)
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, r.Method+" "+r.URL.Path)
	answer := func(code int, body string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		io.WriteString(w, body)
	}
	if f.fail != nil {
		if code, body := f.fail(r); code != 0 {
			answer(code, body)
			return
		}
	}
	if r.Header.Get("Authorization") != "Bearer tok" {
		answer(http.StatusUnauthorized, status(http.StatusUnauthorized, "Unauthorized"))
		return
	}
	var doc map[string]any
	if err := json.NewDecoder(r.Body).Decode(&doc); err != nil {
		answer(http.StatusBadRequest, status(http.StatusBadRequest, "BadRequest"))
		return
	}
	merge := func(o map[string]any) {
		for k, v := range doc {
			o[k] = v
		}
	}
	switch name, isNRT := strings.CutPrefix(r.URL.Path, nrtPath+"/"); {
	case r.Method == http.MethodPost && r.URL.Path == nrtPath:
		md, _ := doc["metadata"].(map[string]any)
		f.objs[md["name"].(string)] = doc
		answer(http.StatusCreated, mustJSON(doc))
	case r.Method == http.MethodPatch && isNRT && r.Header.Get("Content-Type") == "application/merge-patch+json":
		o, ok := f.objs[name]
		if !ok {
			answer(http.StatusNotFound, status(http.StatusNotFound, "NotFound"))
			return
		}
		merge(o)
		answer(http.StatusOK, mustJSON(o))
	case r.Method == http.MethodPatch && r.URL.Path == "/api/v1/nodes/n1" && r.Header.Get("Content-Type") == "application/merge-patch+json":
		ann := doc["metadata"].(map[string]any)["annotations"].(map[string]any)
		for k, v := range ann {
			if v == nil {
				delete(f.nodes["n1"], k)
			} else {
				f.nodes["n1"][k] = v
			}
		}
		answer(http.StatusOK, mustJSON(map[string]any{"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": "n1", "annotations": f.nodes["n1"]}}))
	default:
		answer(http.StatusMethodNotAllowed, status(http.StatusMethodNotAllowed, "MethodNotAllowed"))
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func (f *fakeAPI) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.reqs...)
}

// fast makes p retry without waiting long.
func fast(p *Publisher) *Publisher {
	p.backoff = wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 5}
	return p
}

func TestPublishCreatesThenPatches(t *testing.T) {
	api, srv := newFakeAPI(t)
	p := publisherOf(t, srv.URL, "tok")
	topo := topology.MustSynthetic(twoNodes)
	st, _ := alloc.NewState(topo, alloc.NodeSettings{})
	ctx := context.Background()
	if err := p.Publish(ctx, nodestate.BuildNRT("n1", topo, st.Pools(), "")); err != nil {
		t.Fatalf("first Publish: %v", err)
	}
	if _, err := st.Allocate(alloc.Request{ID: "a", CPUs: 2, QoS: alloc.LSE}); err != nil {
		t.Fatal(err)
	}
	if err := p.Publish(ctx, nodestate.BuildNRT("n1", topo, st.Pools(), "")); err != nil {
		t.Fatalf("second Publish: %v", err)
	}
	want := []string{"PATCH " + nrtPath + "/n1", "POST " + nrtPath, "PATCH " + nrtPath + "/n1"}
	if diff := cmp.Diff(want, api.requests()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	b, _ := json.Marshal(api.objs["n1"]["zones"])
	if !strings.Contains(string(b), `"available":"6"`) || api.objs["n1"]["kind"] != nodestate.NRTKind {
		t.Errorf("stored object %v does not show 2 CPUs taken", api.objs["n1"])
	}
	bad := publisherOf(t, srv.URL, "wrong")
	if err := bad.Publish(ctx, nodestate.BuildNRT("n1", topo, st.Pools(), "")); !apierrors.IsUnauthorized(err) || !strings.Contains(err.Error(), "publishing the NodeResourceTopology n1") {
		t.Errorf("Publish with a wrong token = %v, want Unauthorized, naming the object", err)
	}
}

// Without the CRD every request of the resource is a 404: the error says
// what to install.
func TestPublishWithoutTheCRD(t *testing.T) {
	api, srv := newFakeAPI(t)
	api.fail = func(r *http.Request) (int, string) { return http.StatusNotFound, "404 page not found" }
	topo := topology.MustSynthetic(twoNodes)
	err := publisherOf(t, srv.URL, "tok").Publish(context.Background(), nodestate.BuildNRT("n1", topo, alloc.Pools{}, ""))
	if !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), "is the CRD noderesourcetopologies.topology.node.k8s.io installed?") {
		t.Errorf("Publish without the CRD = %v, want NotFound naming the CRD", err)
	}
}

// Transient failures (a conflict, the server's 5xx or 429) are retried
// with backoff until the write goes through; refusals are not, and a
// failure that lasts ends after the backoff's steps.
func TestPublisherRetriesTransientFailures(t *testing.T) {
	topo := topology.MustSynthetic(twoNodes)
	v := "[4,0]"
	publishNRT := func(p *Publisher) error {
		return p.Publish(context.Background(), nodestate.BuildNRT("n1", topo, alloc.Pools{}, ""))
	}
	annotate := func(p *Publisher) error {
		return p.AnnotateNode(context.Background(), "n1", nodestate.Annotations{"corepin.io/numa-free": &v})
	}
	tests := []struct {
		name     string
		do       func(*Publisher) error
		code     int    // answered to the first `failures` requests
		reason   string // the Status's reason
		failures int
		wantReqs int
		wantErr  func(error) bool // nil: success
	}{
		{name: "NRT patch conflict", do: publishNRT, code: http.StatusConflict, reason: "Conflict", failures: 1, wantReqs: 3}, // 409, then PATCH 404 + POST
		{name: "NRT internal error", do: publishNRT, code: http.StatusInternalServerError, reason: "InternalError", failures: 2, wantReqs: 4},
		{name: "node patch internal error", do: annotate, code: http.StatusInternalServerError, reason: "InternalError", failures: 1, wantReqs: 2},
		{name: "node patch unavailable", do: annotate, code: http.StatusServiceUnavailable, reason: "ServiceUnavailable", failures: 1, wantReqs: 2},
		{name: "node patch too many requests", do: annotate, code: http.StatusTooManyRequests, reason: "TooManyRequests", failures: 1, wantReqs: 2},
		{name: "node patch gateway timeout", do: annotate, code: http.StatusGatewayTimeout, reason: "Timeout", failures: 1, wantReqs: 2},
		{name: "forbidden is final", do: annotate, code: http.StatusForbidden, reason: "Forbidden", failures: 1, wantReqs: 1, wantErr: apierrors.IsForbidden},
		{name: "invalid is final", do: publishNRT, code: http.StatusUnprocessableEntity, reason: "Invalid", failures: 1, wantReqs: 1, wantErr: apierrors.IsInvalid},
		{name: "a lasting failure ends", do: annotate, code: http.StatusInternalServerError, reason: "InternalError", failures: 100, wantReqs: 5, wantErr: apierrors.IsInternalError},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			api, srv := newFakeAPI(t)
			n := 0
			api.fail = func(*http.Request) (int, string) {
				if n++; n <= tc.failures {
					return tc.code, status(tc.code, tc.reason)
				}
				return 0, ""
			}
			err := tc.do(fast(publisherOf(t, srv.URL, "tok")))
			switch {
			case tc.wantErr == nil && err != nil:
				t.Errorf("error %v, want success after %d failures", err, tc.failures)
			case tc.wantErr != nil && !tc.wantErr(err):
				t.Errorf("error %v, want a %s", err, tc.reason)
			}
			if got := api.requests(); len(got) != tc.wantReqs {
				t.Errorf("requests %q, want %d", got, tc.wantReqs)
			}
			if tc.wantErr == nil && tc.do != nil && len(api.objs) == 0 && api.nodes["n1"]["corepin.io/numa-free"] != v {
				t.Errorf("nothing written after the retries: objects %v, node %v", api.objs, api.nodes["n1"])
			}
		})
	}
}

// A connection the API server drops (it restarts) is retried.
func TestPublisherRetriesADroppedConnection(t *testing.T) {
	api, srv := newFakeAPI(t)
	n := 0
	inner := api
	cut := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n++; n == 1 {
			c, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				c.Close()
			}
			return
		}
		inner.ServeHTTP(w, r)
	})
	srv.Config.Handler = cut
	v := "[4,0]"
	if err := fast(publisherOf(t, srv.URL, "tok")).AnnotateNode(context.Background(), "n1", nodestate.Annotations{"corepin.io/numa-free": &v}); err != nil {
		t.Fatalf("AnnotateNode after a dropped connection: %v", err)
	}
	if api.nodes["n1"]["corepin.io/numa-free"] != v || api.nodes["n1"]["other"] != "kept" {
		t.Errorf("node annotations %v, want numa-free set and the other kept", api.nodes["n1"])
	}
}

// pipeListener is an in-memory network for synctest: each dial is a
// net.Pipe whose other end Accept returns.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return &net.UnixAddr{Name: "pipe", Net: "pipe"} }

func (l *pipeListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// A token file the kubelet rotates is read again: client-go's transport
// (what rest.InClusterConfig sets up with BearerTokenFile) keeps a token
// at most a minute, so a request a minute after the rotation carries the
// new token. synctest's clock makes the minute pass at once.
func TestPublisherRereadsTheRotatedTokenFile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var got []string
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			got = append(got, r.Header.Get("Authorization"))
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"}}`)
		})}
		l := newPipeListener()
		go srv.Serve(l)
		defer srv.Close()
		file := filepath.Join(t.TempDir(), "token")
		write := func(tok string) {
			if err := os.WriteFile(file, []byte(tok+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		write("first")
		p, err := New(&rest.Config{Host: "http://apiserver", BearerTokenFile: file, Dial: l.dial})
		if err != nil {
			t.Fatal(err)
		}
		v := "[1]"
		annotate := func() {
			if err := p.AnnotateNode(t.Context(), "n1", nodestate.Annotations{"corepin.io/numa-free": &v}); err != nil {
				t.Fatal(err)
			}
		}
		annotate()
		write("second") // the kubelet rotates the projected token
		annotate()
		time.Sleep(time.Minute)
		annotate()
		mu.Lock()
		defer mu.Unlock()
		if diff := cmp.Diff([]string{"Bearer first", "Bearer first", "Bearer second"}, got); diff != "" {
			t.Errorf("Authorization of the requests (-want +got):\n%s", diff)
		}
	})
}

// Outside a pod, or in one without its service-account token, there is no
// in-cluster publisher, and the error says so.
func TestInClusterOutsideAPod(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	if _, err := InCluster("corepin-nri/test"); !errors.Is(err, ErrNotInCluster) {
		t.Errorf("InCluster without KUBERNETES_SERVICE_HOST = %v, want ErrNotInCluster", err)
	}
	if _, err := os.Stat("/var/run/secrets/kubernetes.io/serviceaccount/token"); err == nil {
		t.Skip("this machine has a service-account token")
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
	t.Setenv("KUBERNETES_SERVICE_PORT", "443")
	if _, err := InCluster("corepin-nri/test"); !errors.Is(err, ErrNotInCluster) || !strings.Contains(err.Error(), "token") {
		t.Errorf("InCluster without a token file = %v, want ErrNotInCluster naming the token", err)
	}
}
