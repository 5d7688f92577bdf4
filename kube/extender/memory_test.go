package extender

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	"sigs.k8s.io/yaml"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/topology"
)

// chartMemoryLimit is the extender container's memory limit in the chart's
// values.yaml, in bytes.
func chartMemoryLimit(t *testing.T) int64 {
	t.Helper()
	data, err := os.ReadFile("../../deploy/helm/corepin/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Scheduler struct {
			ExtenderResources corev1.ResourceRequirements `json:"extenderResources"`
		} `json:"scheduler"`
	}
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatalf("parsing values.yaml: %v", err)
	}
	q, ok := v.Scheduler.ExtenderResources.Limits[corev1.ResourceMemory]
	if !ok {
		t.Fatal("values.yaml sets no scheduler.extenderResources.limits.memory")
	}
	return q.Value()
}

// bigBody is the /filter body of a pod asking 4 CPUs and nodes of 1024
// CPUs (4 sockets, 8 NUMA nodes, 16 L3 groups), each publishing its
// topology, one held CPU and its settings (default topology policy
// single-numa-node), as nodestate.NodeAnnotations writes them, until the body
// is size bytes at most; nodes i and i+distinct hold the same CPU (share
// a state). It returns the body and its nodes.
func bigBody(t *testing.T, size, distinct int) ([]byte, int) {
	t.Helper()
	big := topology.MustSynthetic(topology.Shape{Sockets: 4, NodesPerSocket: 2, L3PerNode: 2, CoresPerL3: 32, ThreadsPerCore: 2})
	pod, err := json.Marshal(guaranteedPod("enc", "4", nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	b.WriteString(`{"Pod":`)
	b.Write(pod)
	b.WriteString(`,"Nodes":{"metadata":{},"items":[`)
	const tail = `]},"NodeNames":null}`
	items := make([][]byte, 0, distinct)
	n := 0
	for ; ; n++ {
		if n < distinct {
			st, err := alloc.NewState(big, alloc.NodeSettings{Reserved: cpuset.New(0)})
			if err != nil {
				t.Fatal(err)
			}
			if err := st.Assign(alloc.Assignment{ID: "x/held", QoS: alloc.LSE, CPUs: cpuset.New(1 + n)}); err != nil {
				t.Fatal(err)
			}
			item, err := json.Marshal(publishedNode(t, "node-00000", st, "single-numa-node"))
			if err != nil {
				t.Fatal(err)
			}
			items = append(items, item)
		}
		item := bytes.Replace(items[n%distinct], []byte(`"name":"node-00000"`), fmt.Appendf(nil, `"name":"node-%05d"`, n), 1)
		if b.Len()+1+len(item)+len(tail) > size {
			break
		}
		if n > 0 {
			b.WriteByte(',')
		}
		b.Write(item)
	}
	b.WriteString(tail)
	return b.Bytes(), n
}

// The child process of TestBigCallsFitTheChartsMemoryLimit: the extender
// as `corepin extender --memory-limit` runs it, serving on loopback, and
// GET /status answering its /proc/self/status.
func TestMain(m *testing.M) {
	if limit := os.Getenv("COREPIN_EXTENDER_MEMORY_CHILD"); limit != "" {
		os.Exit(memoryChild(limit))
	}
	os.Exit(m.Run())
}

func memoryChild(limit string) int {
	n, err := strconv.ParseInt(limit, 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	// What the command does (cmd/corepin/cli/extender.go).
	debug.SetMemoryLimit(SoftMemoryLimit(n))
	e := New(WithMemoryLimit(n))
	mux := http.NewServeMux()
	mux.Handle("/", e.Handler())
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		b, err := os.ReadFile("/proc/self/status")
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		w.Write(b)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("http://%s\n", ln.Addr())
	go http.Serve(ln, mux)
	io.Copy(io.Discard, os.Stdin) // until the test ends
	return 0
}

// statusKiB is the field (VmHWM, VmRSS) of the child's /proc/self/status
// in bytes.
func statusBytes(t *testing.T, url, field string) int64 {
	t.Helper()
	resp, err := http.Get(url + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("%s: %v", l, err)
			}
			return kb << 10
		}
	}
	t.Skipf("no %s in /proc/self/status", field)
	return 0
}

// TestBigCallsFitTheChartsMemoryLimit (issue 17: a 12 MB /filter peaked at
// 274 MB, one near the 64 MiB body cap at 1.9 GB, three at once 2.3 GB)
// runs the extender as the chart does, in a process of its own given the
// chart's memory limit (read from values.yaml), sends it a /filter of
// nodes of 1024 CPUs as large as its body cap allows, every node a
// distinct state, then three such calls at once, and checks that each is
// answered in full and that the process's peak resident memory (VmHWM)
// stays under the limit.
func TestBigCallsFitTheChartsMemoryLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes thousands of 1024-CPU nodes: about 20 s of CPU")
	}
	if raceEnabled {
		t.Skip("the race detector multiplies the memory measured")
	}
	if runtime.GOOS != "linux" {
		t.Skip("reads VmHWM from /proc/self/status")
	}
	limit := chartMemoryLimit(t)
	maxBody := New(WithMemoryLimit(limit)).maxBody
	if maxBody < 64<<20 {
		t.Errorf("under the chart's limit %d the body cap is %d bytes, less than the 64 MiB the extender took before", limit, maxBody)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "COREPIN_EXTENDER_MEMORY_CHILD="+strconv.FormatInt(limit, 10), "GOMEMLIMIT=")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("extender process: %v", err)
		}
	})
	url, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the extender's address: %v", err)
	}
	url = strings.TrimSpace(url)

	call := func(body []byte, nodes int) error {
		resp, err := http.Post(url+"/filter", "application/json", bytes.NewReader(body))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
			return fmt.Errorf("POST /filter = %d %s", resp.StatusCode, b)
		}
		var res extenderv1.ExtenderFilterResult
		if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
			return fmt.Errorf("decoding the answer: %w", err)
		}
		if got := len(res.Nodes.Items) + len(res.FailedNodes) + len(res.FailedAndUnresolvableNodes); got != nodes {
			return fmt.Errorf("answered %d nodes of %d", got, nodes)
		}
		return nil
	}

	body, nodes := bigBody(t, int(maxBody), 1<<20)
	if err := call(body, nodes); err != nil {
		t.Fatal(err)
	}
	one := statusBytes(t, url, "VmHWM")
	t.Logf("one call of %d bytes (%d nodes): peak RSS %d MiB, limit %d MiB", len(body), nodes, one>>20, limit>>20)
	if one >= limit {
		t.Errorf("one call of %d bytes: peak RSS %d bytes, not under the chart's limit %d", len(body), one, limit)
	}

	// Three at once: 16 distinct states spare the CPU; the bodies, the
	// kept nodes and the answers are as large.
	body, nodes = bigBody(t, int(maxBody), 16)
	errc := make(chan error, 3)
	for range 3 {
		go func() { errc <- call(body, nodes) }()
	}
	for range 3 {
		if err := <-errc; err != nil {
			t.Error(err)
		}
	}
	three := statusBytes(t, url, "VmHWM")
	t.Logf("three calls of %d bytes at once: peak RSS %d MiB; now %d MiB", len(body), three>>20, statusBytes(t, url, "VmRSS")>>20)
	if three >= limit {
		t.Errorf("three calls of %d bytes at once: peak RSS %d bytes, not under the chart's limit %d", len(body), three, limit)
	}
}
