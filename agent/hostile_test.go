package agent

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/internal/testutil"
)

// hostile is one request that must be refused without a 5xx.
type hostile struct {
	kind, method, path string
	body               []byte
}

// hostileRequest returns a random bad request; adoptions are bodies that
// adopt what corepin already runs (issue 17 §5), made by the test.
func hostileRequest(r *rand.Rand, adoptions []string) hostile {
	valid := `{"name":"ok-1","qos":"LSE","cpus":1,"command":"sleep","args":["600"]}`
	post := func(kind, body string) hostile {
		return hostile{kind: kind, method: http.MethodPost, path: "/v1/workloads", body: []byte(body)}
	}
	names := []string{"..", "../../etc/passwd", "a/b", ".hidden", "-rf", "a..b", "x\x00y", "énorme", strings.Repeat("n", 300),
		"", " ", "run-1-2-x", "a b", "%2e%2e", "tasks\n", "keep-ls/../keep-lse", "./keep-lse", "keep-ls/%2e%2e/keep-lse"}
	enums := []string{`"qos":"GOLD"`, `"bind":"Tight"`, `"exclusive":"Total"`, `"numa":"Nearest"`, `"topology_policy":"strict"`,
		`"qos":"SYSTEM"`, `"qos":"lse"`, `"qos":7`}
	sizes := []string{"-1", "0", "1e308", "-0", "1e9", "65", "99999999999999999999", "0.0001", `"2"`, "null", "[1]", "true", "1.5",
		"65536", "0.001", "0.009"}
	// BE may ask for 0 CPUs (it takes what is left), never for more than
	// the node has.
	beSizes := []string{"-1", "1e308", "1e9", "65536", "65", "99999999999999999999", `"2"`, "null", "[1]", "true"}
	if len(adoptions) > 0 && r.IntN(10) == 0 {
		return post("adopt", adoptions[r.IntN(len(adoptions))])
	}
	switch r.IntN(9) {
	case 0: // bad JSON
		cut := valid[:r.IntN(len(valid))]
		choices := []string{cut, "{", "}", "[]", "null", `{"name":`, "\xff\xfe", `{"name":"a","name":"b"}` + "x", valid + valid, valid + "garbage"}
		return post("bad-json", choices[r.IntN(len(choices))])
	case 1: // huge body
		n := MaxBody + 1 + r.IntN(4*MaxBody)
		return post("huge", `{"name":"big","cpus":1,"command":"sleep","args":["`+strings.Repeat("a", n)+`"]}`)
	case 2: // traversal and malformed names in the body
		name := names[r.IntN(len(names))]
		return post("name", fmt.Sprintf(`{"name":%q,"cpus":1,"command":"sleep"}`, name))
	case 3: // traversal names in the path
		name := names[r.IntN(len(names))]
		m := []string{http.MethodGet, http.MethodDelete, http.MethodPatch}[r.IntN(3)]
		p := "/v1/workloads/" + url.PathEscape(name)
		if r.IntN(2) == 0 {
			p = "/v1/workloads/" + name
		}
		// Issue 27 §3.2: a PATCH of keep-ls/../keep-lse was redirected
		// to keep-lse, and this client follows redirects.
		return hostile{kind: "path", method: m, path: p, body: []byte(`{"cpus":2}`)}
	case 4: // impossible sizes
		q := []string{"LSE", "LSR", "LS", "", "BE"}[r.IntN(5)]
		sz := sizes[r.IntN(len(sizes))]
		if q == "BE" {
			sz = beSizes[r.IntN(len(beSizes))]
		}
		if (q == "LS" || q == "") && sz == "1.5" {
			sz = "0.005" // 1.5 CPUs of LS is a valid size
		}
		return post("size", fmt.Sprintf(`{"name":"sz","qos":%q,"cpus":%s,"command":"sleep"}`, q, sz))
	case 5: // unknown enums and fields
		if r.IntN(3) == 0 {
			return post("field", `{"name":"f","cpus":1,"command":"sleep","priority":"high"}`)
		}
		return post("enum", `{"name":"e","cpus":1,"command":"sleep",`+enums[r.IntN(len(enums))]+`}`)
	case 6: // what runs in it
		bodies := []string{
			`{"name":"w","cpus":1}`,
			`{"name":"w","cpus":1,"command":"sleep","pid":5}`,
			`{"name":"w","cpus":1,"pid":1}`,
			`{"name":"w","cpus":1,"pid":-3}`,
			`{"name":"w","cpus":1,"pid":99999999}`,
			`{"name":"w","cpus":1,"pid":4194000}`,
			`{"name":"w","cpus":1,"cgroup":"../../x"}`,
			`{"name":"w","cpus":1,"cgroup":"/"}`,
			`{"name":"w","cpus":1,"cgroup":"no/such/cgroup"}`,
			`{"name":"w","cpus":1,"command":"/no/such/binary"}`,
			`{"name":"w","cpus":1,"command":"./relative/x"}`,
			`{"name":"w","cpus":1,"args":["x"]}`,
			`{"name":"w","cpus":1,"command":"sleep","args":` + fmt.Sprint(strings.Repeat(`"a",`, MaxArgs+1)) + `"a"]}`,
		}
		b := bodies[r.IntN(len(bodies))]
		b = strings.Replace(b, `"args":"a",`, `"args":["a",`, 1)
		return post("source", b)
	case 7: // wrong methods and paths
		reqs := []hostile{
			{method: http.MethodPut, path: "/v1/workloads"},
			{method: http.MethodPatch, path: "/v1/workloads/keep-lse"},
			{method: http.MethodPost, path: "/v1/topology"},
			{method: http.MethodGet, path: "/v2/workloads"},
			{method: http.MethodDelete, path: "/v1/workloads"},
			{method: http.MethodGet, path: "/v1/workloads/a/b/c"},
		}
		h := reqs[r.IntN(len(reqs))]
		h.kind = "route"
		return h
	default: // a valid request for a name that exists: 409, no change
		return post("exists", `{"name":"keep-ls","cpus":0.1,"command":"sleep","args":["600"]}`)
	}
}

// newNodeWithKeepers is newNode holding two workloads hostile requests
// must leave alone: keep-lse (LSE, 1 CPU) and keep-ls (LS, 0.3 CPU).
func newNodeWithKeepers(t *testing.T) (*Node, string) {
	t.Helper()
	n, root := newNode(t)
	for _, s := range []Spec{
		{Name: "keep-lse", QoS: "LSE", CPUs: f64(1), Command: "sleep", Args: []string{"600"}},
		{Name: "keep-ls", CPUs: f64(0.3), Command: "sleep", Args: []string{"600"}},
	} {
		if _, err := n.Create(s); err != nil {
			t.Fatal(err)
		}
	}
	return n, root
}

// TestHostileRequests sends bad requests of every kind, and adoptions of
// what corepin already runs (a thread of the agent, the agent, its root
// and runs' roots, another workload's process and group, a zombie, a
// kernel thread): none may panic the agent or get a 5xx, none may
// succeed, and the state, the live groups, the processes in them and the
// agent's own cgroups stay as they were. make soak sends 10,000
// (COREPIN_SOAK_HOSTILE).
func TestHostileRequests(t *testing.T) {
	count := soakInt("COREPIN_SOAK_HOSTILE", 1000)
	n, root := newNodeWithKeepers(t)
	before := n.List()
	liveBefore := liveGroups(t, root)
	var adoptions []string
	pidsBefore := map[string][]int{}
	for _, name := range []string{"keep-lse", "keep-ls"} {
		dir := groupDir(t, root, name)
		pidsBefore[name] = readPids(dir)
		for _, p := range pidsBefore[name] {
			adoptions = append(adoptions, fmt.Sprintf(`{"name":"evil","qos":"LS","cpus":0.2,"pid":%d}`, p))
		}
		for _, q := range []string{`"qos":"LS","cpus":0.2`, `"qos":"LSE","cpus":1`, `"qos":"BE","cpus":0`} {
			for _, cg := range []string{root + "/" + filepath.Base(dir), "/" + root + "/" + filepath.Base(dir) + "/sub"} {
				adoptions = append(adoptions, fmt.Sprintf(`{"name":"evil",%s,"cgroup":%q}`, q, cg))
			}
		}
	}
	for _, q := range []string{`"qos":"LS","cpus":0.2`, `"qos":"LSE","cpus":1`, `"qos":"BE","cpus":0`} {
		for _, cg := range []string{root, "/" + root + "/", "corepin", "corepin/run-1-2-job-0", "corepin-be", "corepin-be/run-1-2-job-0"} {
			adoptions = append(adoptions, fmt.Sprintf(`{"name":"evil",%s,"cgroup":%q}`, q, cg))
		}
		for _, p := range []int{otherThread(t), os.Getpid(), zombie(t), 2} {
			adoptions = append(adoptions, fmt.Sprintf(`{"name":"evil",%s,"pid":%d}`, q, p))
		}
	}
	selfBefore, err := selfCgroups()
	if err != nil {
		t.Fatal(err)
	}
	var panicked panics
	// The hostile requests and the slow clients reach one node through two
	// servers: the slow clients' has short read timeouts, so that they are
	// dropped soon; a busy machine can take longer than those to read a
	// whole request (it reset them on a nice-19 run under stress-ng), so
	// the other's are testutil.Patience.
	socket := serve(t, &Server{Node: n, Metrics: NewMetrics(), Log: slog.New(&panicked), HeaderTimeout: testutil.Patience, BodyTimeout: testutil.Patience})
	slowSocket := serve(t, &Server{Node: n, Metrics: NewMetrics(), Log: slog.New(&panicked), HeaderTimeout: 500 * time.Millisecond, BodyTimeout: time.Second})
	hc := &http.Client{Timeout: testutil.Patience, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		}}}

	// Slow clients: a header that never ends and a body that never
	// arrives. The server must drop both while serving everyone else.
	slowDone := make(chan string, 2)
	for _, partial := range []string{
		"POST /v1/workloads HTTP/1.1\r\nHost: x\r\nContent-Le",
		"POST /v1/workloads HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"name\":",
	} {
		go func() {
			c, err := net.Dial("unix", slowSocket)
			if err != nil {
				slowDone <- err.Error()
				return
			}
			defer c.Close()
			c.Write([]byte(partial))
			c.SetReadDeadline(time.Now().Add(testutil.Patience))
			b, err := io.ReadAll(c) // returns when the server closes
			if err != nil {
				slowDone <- fmt.Sprintf("a slow client was not dropped: %v", err)
				return
			}
			if strings.Contains(string(b), " 201 ") {
				slowDone <- "a slow client got 201"
				return
			}
			slowDone <- ""
		}()
	}

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11))
	reqs := make([]hostile, count, count+len(adoptions))
	for i := range reqs {
		reqs[i] = hostileRequest(rng, adoptions)
	}
	for _, b := range adoptions { // each at least once
		reqs = append(reqs, hostile{kind: "adopt", method: http.MethodPost, path: "/v1/workloads", body: []byte(b)})
	}
	rng.Shuffle(len(reqs), func(i, j int) { reqs[i], reqs[j] = reqs[j], reqs[i] })
	var mu sync.Mutex
	byStatus := map[string]map[int]int{}
	var wg sync.WaitGroup
	next := make(chan hostile)
	for range 8 {
		wg.Go(func() {
			for h := range next {
				req, err := http.NewRequest(h.method, "http://agent"+h.path, bytes.NewReader(h.body))
				if err != nil {
					continue // a path Go itself refuses to send
				}
				resp, err := hc.Do(req)
				if err != nil {
					t.Errorf("%s %s (%s): %v", h.method, h.path, h.kind, err)
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				mu.Lock()
				if byStatus[h.kind] == nil {
					byStatus[h.kind] = map[int]int{}
				}
				byStatus[h.kind][resp.StatusCode]++
				mu.Unlock()
				if resp.StatusCode >= 500 || resp.StatusCode < 400 || resp.StatusCode == http.StatusCreated || resp.StatusCode == http.StatusNoContent ||
					(h.kind == "adopt" && resp.StatusCode != http.StatusConflict && resp.StatusCode != http.StatusUnprocessableEntity) {
					t.Errorf("%s %s (%s, %.80q): status %d: %s", h.method, h.path, h.kind, h.body, resp.StatusCode, b)
				}
			}
		})
	}
	for _, h := range reqs {
		next <- h
	}
	close(next)
	wg.Wait()
	for range 2 { // each says within its read deadline
		if msg := <-slowDone; msg != "" {
			t.Error(msg)
		}
	}
	t.Logf("%d requests (%d adoptions); statuses by kind: %v", len(reqs), byStatus["adopt"][409]+byStatus["adopt"][422], byStatus)
	if c := panicked.n.Load(); c > 0 {
		t.Errorf("%d handler panics", c)
	}
	for name, want := range pidsBefore {
		if got := readPids(groupDir(t, root, name)); !cmp.Equal(got, want) {
			t.Errorf("%s's group holds %v, want %v", name, got, want)
		}
	}
	if self, _ := selfCgroups(); !cmp.Equal(self, selfBefore) {
		t.Errorf("the agent moved: its cgroups are %v, were %v", self, selfBefore)
	}
	if d := cmp.Diff(before, n.List()); d != "" {
		t.Errorf("state changed (-before +after):\n%s", d)
	}
	if d := cmp.Diff(liveBefore, liveGroups(t, root)); d != "" {
		t.Errorf("live groups changed (-before +after):\n%s", d)
	}
}

// panics counts the handler panics the server logs (Server.recoverer).
type panics struct{ n atomic.Int64 }

func (p *panics) Enabled(context.Context, slog.Level) bool { return true }
func (p *panics) WithAttrs([]slog.Attr) slog.Handler       { return p }
func (p *panics) WithGroup(string) slog.Handler            { return p }
func (p *panics) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "handler panic" {
		p.n.Add(1)
	}
	return nil
}
