package netbench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corepin/corepin/internal/testutil"
)

// childEnv makes the test binary act as corepin (see child_test.go), so
// tests can run ranks as real processes (inside namespaces too).
const childEnv = "COREPIN_NETBENCH_TEST_CHILD"

// serveLoopback runs Serve on a loopback port until the test ends; done is
// closed when Serve returns, with its error in *serveErr.
func serveLoopback(t *testing.T, conns int) (addr string, done <-chan struct{}, serveErr *error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan struct{})
	serveErr = new(error)
	go func() {
		*serveErr = Serve(ctx, ln, conns)
		close(ch)
	}()
	t.Cleanup(func() {
		cancel()
		<-ch
	})
	return ln.Addr().String(), ch, serveErr
}

func TestPingPongLoopback(t *testing.T) {
	addr, done, serveErr := serveLoopback(t, 1)
	res, err := PingPong(context.Background(), Options{Addr: addr, Messages: 500, Size: 64})
	if err != nil {
		t.Fatal(err)
	}
	if res.RoundTrips != 500 {
		t.Errorf("RoundTrips = %d, want 500", res.RoundTrips)
	}
	if res.WallS <= 0 || res.OpsPerS <= 0 || res.RTTP50US <= 0 {
		t.Errorf("result %+v: want positive wall, rate and p50", res)
	}
	if res.RTTP99US < res.RTTP50US {
		t.Errorf("p99 %v < p50 %v", res.RTTP99US, res.RTTP50US)
	}
	select {
	case <-done:
		if *serveErr != nil {
			t.Errorf("Serve after its one connection = %v, want nil", *serveErr)
		}
	case <-time.After(testutil.Patience):
		t.Errorf("Serve did not return after its one connection closed")
	}
}

func TestPingPongLargeMessages(t *testing.T) {
	// Messages larger than one read of the echo server still arrive whole.
	addr, _, _ := serveLoopback(t, 0)
	res, err := PingPong(context.Background(), Options{Addr: addr, Messages: 20, Size: 200 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if res.RoundTrips != 20 {
		t.Errorf("RoundTrips = %d, want 20", res.RoundTrips)
	}
}

func TestPingPongWaitsForStart(t *testing.T) {
	addr, _, _ := serveLoopback(t, 0)
	ctx, cancel := context.WithCancel(context.Background())
	connected := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		_, err := PingPong(ctx, Options{Addr: addr, Messages: 10, Start: make(chan struct{}),
			Connected: func() error { close(connected); return nil }})
		errc <- err
	}()
	<-connected
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("PingPong cancelled while waiting = %v, want context.Canceled", err)
	}
}

func TestInvalidOptions(t *testing.T) {
	ctx := context.Background()
	if _, err := PingPong(ctx, Options{Addr: "127.0.0.1:1", Messages: 0}); !errors.Is(err, ErrInvalid) {
		t.Errorf("PingPong(messages 0) = %v, want ErrInvalid", err)
	}
	if _, err := PingPong(ctx, Options{Addr: "127.0.0.1:1", Messages: 1, Size: -1}); !errors.Is(err, ErrInvalid) {
		t.Errorf("PingPong(size -1) = %v, want ErrInvalid", err)
	}
	if _, err := Compute(ctx, ComputeOptions{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Compute(0 ops) = %v, want ErrInvalid", err)
	}
	if _, err := NewVethPair(ctx, "Bad-Name"); !errors.Is(err, ErrInvalid) {
		t.Errorf("NewVethPair(Bad-Name) = %v, want ErrInvalid", err)
	}
}

func TestCompute(t *testing.T) {
	res, err := Compute(context.Background(), ComputeOptions{Ops: 2000})
	if err != nil {
		t.Fatal(err)
	}
	if res.Ops != 2000 || res.WallS <= 0 || res.OpsPerS <= 0 {
		t.Errorf("Compute = %+v", res)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Compute(ctx, ComputeOptions{Ops: 1 << 40}); !errors.Is(err, context.Canceled) {
		t.Errorf("Compute on a cancelled context = %v, want context.Canceled", err)
	}
}

func TestNearestRank(t *testing.T) {
	var xs []time.Duration
	for i := 1; i <= 100; i++ {
		xs = append(xs, time.Duration(i))
	}
	for _, tc := range []struct {
		name string
		q    float64
		want time.Duration
	}{
		{name: "median", q: 0.5, want: 50},
		{name: "p99", q: 0.99, want: 99},
		{name: "max", q: 1, want: 100},
		{name: "min", q: 0, want: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := nearestRank(xs, tc.q); got != tc.want {
				t.Errorf("nearestRank(1..100, %v) = %v, want %v", tc.q, got, tc.want)
			}
		})
	}
	if got := nearestRank(nil, 0.5); got != 0 {
		t.Errorf("nearestRank(nil) = %v, want 0", got)
	}
}

// The command's JSON is exactly the documented object.
func TestRunRankJSON(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	srvErr := make(chan error, 1)
	go func() {
		srvErr <- RunRank(ctx, RankOptions{Role: RoleServer, Listen: "127.0.0.1:0", Conns: 1, JSON: true}, nil, pw)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	var ready struct {
		Listen string `json:"listen"`
	}
	if err := json.Unmarshal([]byte(line), &ready); err != nil || ready.Listen == "" {
		t.Fatalf("server's first line %q: want {\"listen\":ADDR} (%v)", line, err)
	}
	go io.Copy(io.Discard, pr)
	var out bytes.Buffer
	if err := RunRank(ctx, RankOptions{Role: RoleClient, Connect: ready.Listen, Messages: 50, JSON: true}, nil, &out); err != nil {
		t.Fatal(err)
	}
	var got map[string]float64
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("client output %q: %v", out.String(), err)
	}
	keys := make([]string, 0, len(got))
	for k := range got {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if want := []string{"ops_per_s", "round_trips", "rtt_p50_us", "rtt_p99_us", "wall_s"}; !slices.Equal(keys, want) {
		t.Errorf("client JSON keys = %v, want %v", keys, want)
	}
	if got["round_trips"] != 50 {
		t.Errorf("round_trips = %v, want 50", got["round_trips"])
	}
	if strings.Count(out.String(), "\n") != 1 {
		t.Errorf("client printed %q, want one line", out.String())
	}
	select {
	case err := <-srvErr:
		if err != nil {
			t.Errorf("server = %v, want nil after --conns 1", err)
		}
	case <-time.After(testutil.Patience):
		t.Errorf("server did not exit after --conns 1")
	}
}

func TestRunRankComputeWaitsOnStdin(t *testing.T) {
	stdinR, stdinW := io.Pipe()
	outR, outW := io.Pipe()
	errc := make(chan error, 1)
	go func() {
		errc <- RunRank(context.Background(), RankOptions{Role: RoleCompute, Ops: 100, WaitStdin: true, JSON: true}, stdinR, outW)
		outW.Close()
	}()
	br := bufio.NewReader(outR)
	line, err := br.ReadString('\n')
	if err != nil || strings.TrimSpace(line) != `{"ready":true}` {
		t.Fatalf("first line %q (%v), want {\"ready\":true}", line, err)
	}
	io.WriteString(stdinW, "go\n")
	line, err = br.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	var res ComputeResult
	if err := json.Unmarshal([]byte(line), &res); err != nil || res.Ops != 100 {
		t.Errorf("result line %q: %+v %v", line, res, err)
	}
	if err := <-errc; err != nil {
		t.Error(err)
	}
}

func TestRunRankInvalid(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    RankOptions
	}{
		{name: "no role", o: RankOptions{}},
		{name: "unknown role", o: RankOptions{Role: "bounce"}},
		{name: "server without listen", o: RankOptions{Role: RoleServer}},
		{name: "server with negative conns", o: RankOptions{Role: RoleServer, Listen: "127.0.0.1:0", Conns: -1}},
		{name: "client without connect", o: RankOptions{Role: RoleClient, Messages: 1}},
		{name: "client without messages", o: RankOptions{Role: RoleClient, Connect: "127.0.0.1:1"}},
		{name: "compute without ops", o: RankOptions{Role: RoleCompute}},
		{name: "two barriers", o: RankOptions{Role: RoleCompute, Ops: 1, WaitStdin: true, WaitFIFO: "/x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := RunRank(context.Background(), tc.o, nil, io.Discard); !errors.Is(err, ErrUsage) {
				t.Errorf("RunRank(%+v) = %v, want ErrUsage", tc.o, err)
			}
		})
	}
}

func requireVeth(t *testing.T) {
	t.Helper()
	if err := ProbeVeth(); err != nil {
		t.Skipf("skipping: %v", err)
	}
}

func nsExists(t *testing.T, name string) bool {
	t.Helper()
	names, err := ListNamespaces(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return slices.Contains(names, name)
}

func TestVethPair(t *testing.T) {
	requireVeth(t)
	ctx := context.Background()
	v, err := NewVethPair(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	for _, tc := range []struct {
		ns, link, addr string
	}{
		{ns: v.NSA, link: v.LinkA, addr: VethAddrA.String() + "/30"},
		{ns: v.NSB, link: v.LinkB, addr: VethAddrB.String() + "/30"},
	} {
		if !nsExists(t, tc.ns) {
			t.Errorf("namespace %s missing while the pair is open", tc.ns)
		}
		out, err := exec.Command("ip", "-n", tc.ns, "-o", "addr", "show", "dev", tc.link).CombinedOutput()
		if err != nil || !strings.Contains(string(out), tc.addr) {
			t.Errorf("ip -n %s addr show dev %s = %q (%v), want %s", tc.ns, tc.link, out, err, tc.addr)
		}
		out, err = exec.Command("ip", "-n", tc.ns, "link", "show", "dev", tc.link).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "UP") {
			t.Errorf("link %s in %s not up: %q (%v)", tc.link, tc.ns, out, err)
		}
	}

	// A real ping-pong from namespace B to the server in namespace A.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	sargv := Exec(v.NSA, self, "pingpong", "server", "--listen", VethAddrA.String()+":0", "--conns", "1", "-o", "json")
	srv := exec.Command(sargv[0], sargv[1:]...)
	srv.Env = append(os.Environ(), childEnv+"=1")
	srvOut, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Process.Kill()
	line, err := bufio.NewReader(srvOut).ReadString('\n')
	if err != nil {
		t.Fatalf("reading server's listen line: %v", err)
	}
	var ready struct{ Listen string }
	if err := json.Unmarshal([]byte(line), &ready); err != nil {
		t.Fatalf("server line %q: %v", line, err)
	}
	if !strings.HasPrefix(ready.Listen, VethAddrA.String()+":") {
		t.Errorf("server listens on %s, want %s", ready.Listen, VethAddrA)
	}
	argv := Exec(v.NSB, self, "pingpong", "client", "--connect", ready.Listen, "--messages", "100", "-o", "json")
	cli := exec.Command(argv[0], argv[1:]...)
	cli.Env = append(os.Environ(), childEnv+"=1")
	out, err := cli.Output()
	if err != nil {
		t.Fatalf("client in %s: %v", v.NSB, err)
	}
	var res Result
	if err := json.Unmarshal(out, &res); err != nil || res.RoundTrips != 100 {
		t.Errorf("client output %q: %+v %v", out, res, err)
	}
	if err := srv.Wait(); err != nil {
		t.Errorf("server in %s: %v", v.NSA, err)
	}
	// The address of namespace A is not reachable from the host namespace.
	if c, err := net.DialTimeout("tcp", ready.Listen, 200*time.Millisecond); err == nil {
		c.Close()
		t.Errorf("dialled %s from the host namespace: traffic is not confined", ready.Listen)
	}

	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	if err := v.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
	for _, ns := range []string{v.NSA, v.NSB} {
		if nsExists(t, ns) {
			t.Errorf("namespace %s still exists after Close", ns)
		}
		if err := exec.Command("ip", "-n", ns, "link", "show").Run(); err == nil {
			t.Errorf("ip -n %s link show succeeded after Close", ns)
		}
	}
}

func TestRemoveStale(t *testing.T) {
	requireVeth(t)
	ctx := context.Background()
	// 4194305 is above the kernel's largest pid_max: never a live process.
	const stale = "corepin-4194305-test-a"
	if err := exec.Command("ip", "netns", "add", stale).Run(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteNS(stale) })
	live, err := NewVethPair(ctx, "live")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { live.Close() })
	removed, err := RemoveStale(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(removed, stale) || nsExists(t, stale) {
		t.Errorf("RemoveStale removed %v, want %s gone", removed, stale)
	}
	if slices.Contains(removed, live.NSA) || !nsExists(t, live.NSA) {
		t.Errorf("RemoveStale removed the live pair's %s", live.NSA)
	}
}
