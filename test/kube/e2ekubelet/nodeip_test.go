package e2ekubelet

import (
	"net"
	"os"
	"slices"
	"testing"
)

// TestOwnNodeIP: where a runner has no IPv4 address but loopback, the
// test gives the machine one the kubelet accepts (on a dummy interface,
// else on lo), reachable on the machine, and takes it away at the end.
func TestOwnNodeIP(t *testing.T) {
	if os.Geteuid() != 0 {
		missing(t, "adding an address needs root")
	}
	has := func() bool {
		addrs, err := net.InterfaceAddrs()
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(addrs, func(a net.Addr) bool { n, ok := a.(*net.IPNet); return ok && n.IP.String() == ownIP })
	}
	t.Run("added", func(t *testing.T) {
		ip := addNodeIP(t)
		if parsed := net.ParseIP(ip); parsed == nil || parsed.IsLoopback() || parsed.IsLinkLocalUnicast() || parsed.To4() == nil {
			t.Fatalf("node IP %q: the kubelet wants an IPv4 address, not loopback or link-local", ip)
		}
		if !has() {
			t.Fatalf("%s is on no interface", ip)
		}
		l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			t.Fatalf("listening on the node IP: %v", err)
		}
		defer l.Close()
		go func() {
			if c, err := l.Accept(); err == nil {
				c.Close()
			}
		}()
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatalf("the node IP is not reachable on the machine: %v", err)
		}
		c.Close()
	})
	if has() {
		t.Errorf("%s still on an interface after the test", ownIP)
	}
}
