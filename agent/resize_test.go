package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/nodecore"
	"github.com/corepin/corepin/store"
)

// twoCPUs skips a test that needs two allowed CPUs for one workload.
func twoCPUs(t *testing.T, n *Node) {
	t.Helper()
	if n.Topology().Allowed().Size() < 2 {
		t.Skip("skipping: needs 2 allowed CPUs")
	}
}

// withOneLSE opens a Node on state under a fresh cgroup root, skipping
// on a machine of one CPU, and creates rs, an LSE workload of 1 CPU.
func withOneLSE(t *testing.T, state string) (*Node, string, Workload) {
	t.Helper()
	root := testRoot(t)
	n, err := openNode(t, root, state)
	if err != nil {
		t.Fatal(err)
	}
	if n.Topology().Allowed().Size() < 2 {
		n.Close()
		t.Skip("skipping: needs 2 allowed CPUs")
	}
	w, err := n.Create(Spec{Name: "rs", QoS: "LSE", CPUs: f64(1), Command: "sleep", Args: []string{"600"}})
	if err != nil {
		n.Close()
		t.Fatal(err)
	}
	return n, root, w
}

// TestResizeAPI (issue 21 §2): PATCH /v1/workloads/NAME grows an LSE
// workload keeping the CPU it was placed on, its process's
// Cpus_allowed_list follows, a shrink gives back what was added; what is
// wrong as written is 422, what does not fit now 409 (and changes
// nothing), an unknown name 404.
func TestResizeAPI(t *testing.T) {
	n, root := newNode(t)
	twoCPUs(t, n)
	cl := NewClient(serve(t, &Server{Node: n}), "")
	w, err := cl.Create(Spec{Name: "rs", QoS: "LSE", CPUs: f64(1), Command: "sleep", Args: []string{"600"}})
	if err != nil {
		t.Fatal(err)
	}
	first := cpuset.MustParse(w.Cpuset)
	pid := readPids(groupDir(t, root, "rs"))[0]

	w, err = cl.Resize("rs", 2)
	if err != nil {
		t.Fatalf("Resize(rs, 2): %v", err)
	}
	grown := cpuset.MustParse(w.Cpuset)
	if grown.Size() != 2 || !first.IsSubsetOf(grown) || w.PromisedCpuset != first.String() || w.CPUs != 2 || w.Threads != 2 {
		t.Fatalf("Resize(rs, 2) = cpuset %s promised %q cpus %v threads %d; want 2 CPUs holding %s, promised %s",
			w.Cpuset, w.PromisedCpuset, w.CPUs, w.Threads, first, first)
	}
	if got := allowedList(t, pid); got != grown.String() {
		t.Errorf("rs's process runs on %s, want %s", got, grown)
	}
	checkConsistent(t, root, n.List())
	if g, err := cl.Get("rs"); err != nil || g.Cpuset != grown.String() || g.Generation != 2 {
		t.Errorf("Get(rs) = %s generation %d, %v; want %s at generation 2", g.Cpuset, g.Generation, err, grown)
	}

	for _, tc := range []struct {
		name, wl string
		cpus     float64
		want     error
		code     int
	}{
		{name: "a fraction of an LSE", wl: "rs", cpus: 1.5, want: ErrInvalid, code: http.StatusUnprocessableEntity},
		{name: "more than the node", wl: "rs", cpus: float64(n.Topology().Allowed().Size() + 1), want: ErrInvalid, code: http.StatusUnprocessableEntity},
		{name: "unknown", wl: "nobody", cpus: 1, want: ErrNotFound, code: http.StatusNotFound},
		// Issue 27 §3.2: a path naming no workload is 400, before the routes.
		{name: "bad name", wl: "-x", cpus: 1, want: ErrInvalid, code: http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := cl.Resize(tc.wl, tc.cpus)
			var ae *APIError
			if !errors.Is(err, tc.want) || !errors.As(err, &ae) || ae.Status != tc.code {
				t.Errorf("Resize(%s, %v) = %v, want status %d", tc.wl, tc.cpus, err, tc.code)
			}
		})
	}
	for _, body := range []string{`{}`, `{"cpus":2,"qos":"LS"}`, `{"cpus":"2"}`, `{"cpus":2}{}`, `{"CPUs":2}`} {
		req, _ := http.NewRequest(http.MethodPatch, cl.base+"/v1/workloads/rs", strings.NewReader(body))
		resp, err := cl.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnprocessableEntity {
			t.Errorf("PATCH %s: status %d, want 422", body, resp.StatusCode)
		}
	}

	if w, err = cl.Resize("rs", 1); err != nil || w.Cpuset != first.String() || w.PromisedCpuset != "" {
		t.Fatalf("Resize(rs, 1) = %s (promised %q), %v; want %s", w.Cpuset, w.PromisedCpuset, err, first)
	}
	if got := allowedList(t, pid); got != first.String() {
		t.Errorf("after the shrink rs's process runs on %s, want %s", got, first)
	}

	// A BE workload must keep a CPU: rs may not take every one.
	if _, err := cl.Create(Spec{Name: "be", QoS: "BE", CPUs: f64(0.1), Command: "sleep", Args: []string{"600"}}); err != nil {
		t.Fatal(err)
	}
	before := n.List()
	all := float64(n.Topology().Allowed().Size())
	if _, err := cl.Resize("rs", all); !errors.Is(err, ErrRejected) || !strings.Contains(err.Error(), "BE pool") {
		t.Errorf("Resize(rs, %v) beside a BE workload = %v, want 409 naming the BE pool", all, err)
	}
	if d := cmp.Diff(before, n.List()); d != "" {
		t.Errorf("a refused resize changed the state (-before +after):\n%s", d)
	}
	if w, err := cl.Resize("be", 0.5); err != nil || w.CPUs != 0.5 {
		t.Errorf("Resize(be, 0.5) = %v, %v; want cpus 0.5", w.CPUs, err)
	}
	checkConsistent(t, root, n.List())
}

// TestResizeOnAFullDisk: a resize on a full disk is 507 and changes
// nothing, neither the state nor the group.
func TestResizeOnAFullDisk(t *testing.T) {
	requireCgroups(t)
	disk := tinyDisk(t)
	n, root, _ := withOneLSE(t, filepath.Join(disk, "state.db"))
	t.Cleanup(func() { n.Close() })
	before, liveBefore := n.List(), liveGroups(t, root)
	full := fill(t, disk)
	_, err := n.Resize("rs", 2)
	if !errors.Is(err, ErrDiskFull) || statusOf(err) != http.StatusInsufficientStorage {
		t.Errorf("Resize on a full disk = %v (status %d), want ErrDiskFull (507)", err, statusOf(err))
	}
	if d := cmp.Diff(before, n.List()); d != "" {
		t.Errorf("state changed (-before +after):\n%s", d)
	}
	if d := cmp.Diff(liveBefore, liveGroups(t, root)); d != "" {
		t.Errorf("live groups changed (-before +after):\n%s", d)
	}
	if err := os.Remove(full); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Resize("rs", 2); err != nil {
		t.Fatalf("Resize once space is freed: %v", err)
	}
	checkConsistent(t, root, n.List())
}

// TestRestartAfterACommittedResize: an agent that stops between
// committing a resize and writing it into the group (a crash) leaves the
// group on its old CPUs; the next start writes the state's, grown or
// shrunk.
func TestRestartAfterACommittedResize(t *testing.T) {
	requireCgroups(t)
	state := filepath.Join(t.TempDir(), "state.db")
	n, root, w := withOneLSE(t, state)
	topo := n.Topology()
	pid := readPids(groupDir(t, root, "rs"))[0]
	for _, size := range []float64{2, 1} {
		n.Close()
		// The commit of a resize, without the group: what a crash
		// right after it leaves.
		db, err := store.Open(state)
		if err != nil {
			t.Fatal(err)
		}
		ad, err := nodecore.AdmitResize(db, topo, alloc.NodeSettings{}, "rs", size)
		db.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got := allowedList(t, pid); got == ad.Placement.CPUs.String() {
			t.Fatalf("the group already runs on %s before the restart", got)
		}
		if n, err = openNode(t, root, state); err != nil {
			t.Fatal(err)
		}
		checkConsistent(t, root, n.List())
		if got := allowedList(t, pid); got != ad.Placement.CPUs.String() {
			t.Errorf("after the restart rs runs on %s, want %s", got, ad.Placement.CPUs)
		}
		if !cpuset.MustParse(w.Cpuset).IsSubsetOf(ad.Placement.CPUs) {
			t.Errorf("resized to %s, losing its first CPU %s", ad.Placement.CPUs, w.Cpuset)
		}
	}
	n.Close()
}

// FuzzDecodeResize: DecodeResize never panics; what it accepts has a size
// and reads back the same after encoding; everything else is ErrInvalid.
func FuzzDecodeResize(f *testing.F) {
	for _, s := range []string{`{"cpus":4}`, `{"cpus":0.5}`, `{}`, `{"cpus":1,"cpus":2}`, `{"Cpus":1}`, `{"cpus":1} x`, `{"cpus":null}`, `[1]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		rs, err := DecodeResize(bytes.NewReader(b))
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("DecodeResize error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if rs.CPUs == nil {
			t.Fatalf("DecodeResize(%q) accepted no size", b)
		}
		enc, err := json.Marshal(rs)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeResize(bytes.NewReader(enc))
		if err != nil || *back.CPUs != *rs.CPUs {
			t.Fatalf("DecodeResize(%s) = %v, %v; want %v", enc, back.CPUs, err, *rs.CPUs)
		}
	})
}

// TestRestartAfterAResizedAdoptedCgroup: the crash between a resize's
// commit and its cgroup, for an adopted cgroup (a container's, which the
// reconcile adopts by path rather than by listing the agent's groups):
// the next start writes the committed cpuset into it.
func TestRestartAfterAResizedAdoptedCgroup(t *testing.T) {
	requireCgroups(t)
	root := testRoot(t)
	state := filepath.Join(t.TempDir(), "state.db")
	ctr, dirs, pid := containerCgroup(t, root)
	n, err := openNode(t, root, state)
	if err != nil {
		t.Fatal(err)
	}
	twoCPUs(t, n)
	if _, err := n.Create(Spec{Name: "ctr", QoS: "LSE", CPUs: f64(1), Cgroup: "/" + ctr}); err != nil {
		n.Close()
		t.Fatal(err)
	}
	topo := n.Topology()
	n.Close()
	db, err := store.Open(state)
	if err != nil {
		t.Fatal(err)
	}
	ad, err := nodecore.AdmitResize(db, topo, alloc.NodeSettings{}, "ctr", 2)
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	if n, err = openNode(t, root, state); err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	got, _ := os.ReadFile(filepath.Join(dirs[0], "cpuset.cpus"))
	if want := ad.Placement.CPUs.String(); strings.TrimSpace(string(got)) != want || allowedList(t, pid) != want {
		t.Errorf("after the restart the container cgroup has cpus %q, its process %s; want %s", got, allowedList(t, pid), want)
	}
}
