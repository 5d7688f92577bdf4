package agent

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestPathsAreNotCleaned (issue 27 §3.2): a path with "." or ".."
// segments, empty segments or a workload segment that is not a workload
// name gets 400 naming what is wrong, for every method, never the
// ServeMux's redirect to the cleaned path (PATCH /v1/workloads/w1/../l1
// followed would resize l1). The handlers are never reached: the Server
// has no Node.
func TestPathsAreNotCleaned(t *testing.T) {
	h := (&Server{}).Handler()
	for _, tc := range []struct {
		name, path, wantIn string
	}{
		{name: "dotdot", path: "/v1/workloads/..", wantIn: `a ".." segment`},
		{name: "dotdot between names", path: "/v1/workloads/w1/../l1", wantIn: `a ".." segment`},
		{name: "dot", path: "/v1/workloads/./l1", wantIn: `a "." segment`},
		{name: "dotdot above the api", path: "/v1/../healthz", wantIn: `a ".." segment`},
		{name: "escaped dotdot", path: "/v1/workloads/%2e%2e", wantIn: `a ".." segment`},
		{name: "escaped dotdot between names", path: "/v1/workloads/w1/%2E%2E/l1", wantIn: `a ".." segment`},
		{name: "double slash", path: "/v1//workloads/l1", wantIn: "an empty segment"},
		{name: "trailing slash", path: "/v1/workloads/", wantIn: "an empty segment"},
		{name: "trailing slash after a name", path: "/v1/workloads/l1/", wantIn: "an empty segment"},
		{name: "escaped slash in a name", path: "/v1/workloads/a%2Fb", wantIn: "is not a workload name"},
		{name: "leading dot", path: "/v1/workloads/.hidden", wantIn: "is not a workload name"},
		{name: "leading dash", path: "/v1/workloads/-rf", wantIn: "is not a workload name"},
		{name: "inner dotdot", path: "/v1/workloads/a..b", wantIn: "is not a workload name"},
		{name: "space", path: "/v1/workloads/a%20b", wantIn: "is not a workload name"},
		{name: "too long", path: "/v1/workloads/" + strings.Repeat("n", 49), wantIn: "longer than 48 bytes"},
	} {
		for _, method := range []string{http.MethodGet, http.MethodPatch, http.MethodDelete, http.MethodPost, http.MethodPut} {
			t.Run(tc.name+"/"+method, func(t *testing.T) {
				req := httptest.NewRequest(method, "http://agent/", strings.NewReader(`{"cpus":2}`))
				// The path as a server reads it off the wire (NewRequest
				// would clean nothing, but reads only its own form).
				dec, err := url.PathUnescape(tc.path)
				if err != nil {
					t.Fatal(err)
				}
				req.URL.Path, req.URL.RawPath = dec, tc.path
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusBadRequest {
					t.Fatalf("%s %s: status %d (Location %q), want 400: %s", method, tc.path, rec.Code, rec.Header().Get("Location"), rec.Body)
				}
				var body apiError
				if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || !strings.Contains(body.Error, tc.wantIn) {
					t.Errorf("%s %s: body %s (%v), want an error saying %q", method, tc.path, rec.Body, err, tc.wantIn)
				}
			})
		}
	}
	// Clean paths pass through to the routes (a 404 from the mux here,
	// as the Server has no Node to reach for the others).
	for _, p := range []string{"/v1/workloads/a/b/c", "/v2/workloads", "/healthz"} {
		req := httptest.NewRequest(http.MethodGet, "http://agent"+p, nil)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code == http.StatusBadRequest || rec.Code >= 300 && rec.Code < 400 {
			t.Errorf("GET %s: status %d: %s, want the route's own answer", p, rec.Code, rec.Body)
		}
	}
}

// FuzzCheckedPath: checkedPath never panics, and a path it accepts is one
// Go's ServeMux serves as written: it would not redirect it to another.
func FuzzCheckedPath(f *testing.F) {
	for _, p := range []string{"/v1/workloads/w1", "/v1/workloads/w1/../l1", "/v1/workloads/%2e%2e", "//", "/", "/v1/workloads/",
		"/v1/./x", "/v1/workloads/a%2Fb", "x", "/v1/workloads/%zz"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := url.ParseRequestURI(raw)
		if err != nil {
			return
		}
		if checkedPath(u) != nil {
			return
		}
		mux := http.NewServeMux()
		mux.HandleFunc("/", func(http.ResponseWriter, *http.Request) {})
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, &http.Request{Method: http.MethodGet, URL: u, Host: "agent"})
		if rec.Code >= 300 && rec.Code < 400 {
			t.Fatalf("checkedPath accepts %q, which the mux redirects (%d to %q)", raw, rec.Code, rec.Header().Get("Location"))
		}
	})
}

// TestRedirectResizesNothing (issue 27 §3.2): PATCH or DELETE
// /v1/workloads/keep-ls/../keep-lse was redirected (307) to keep-lse, and
// a client that follows redirects (Go's does, body and all) resized or
// deleted keep-lse. It is 400 now and no workload changes.
func TestRedirectResizesNothing(t *testing.T) {
	n, _ := newNodeWithKeepers(t)
	before := n.List()
	socket := serve(t, &Server{Node: n})
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", socket)
	}}}
	for _, p := range []string{"/v1/workloads/keep-ls/../keep-lse", "/v1/workloads/./keep-lse", "/v1/workloads//keep-lse", "/v1/workloads/keep-ls/%2e%2e/keep-lse"} {
		for _, method := range []string{http.MethodPatch, http.MethodDelete} {
			req, err := http.NewRequest(method, "http://agent"+p, strings.NewReader(`{"cpus":2}`))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("%s %s: status %d (at %s): %s, want 400", method, p, resp.StatusCode, resp.Request.URL.Path, b)
			}
		}
	}
	if d := cmp.Diff(before, n.List()); d != "" {
		t.Errorf("a PATCH of a path with dot segments changed the workloads (-before +after):\n%s", d)
	}
}
