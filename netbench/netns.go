package netbench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// ErrUnsupported is wrapped when network namespaces cannot be made here:
// not root, or no ip command (Debian package iproute2).
var ErrUnsupported = errors.New("network namespaces unsupported here")

// Addresses of the two ends of a veth pair: a /30 of the benchmarking range
// 198.18.0.0/15 (RFC 2544), assigned inside the pair's own namespaces only.
var (
	VethAddrA = netip.MustParseAddr("198.18.0.1")
	VethAddrB = netip.MustParseAddr("198.18.0.2")
)

const (
	vethPrefixLen = 30
	// Link names inside the namespaces. The kernel creates each end
	// directly in its target namespace, so pairs never clash on names.
	vethLinkA = "cpveth-a"
	vethLinkB = "cpveth-b"
	nsPrefix  = "corepin-"
)

// nsName matches the namespaces NewVethPair creates:
// corepin-<pid>-<name>-a|b.
var nsName = regexp.MustCompile(`^corepin-([0-9]+)-([a-z0-9]+)-([ab])$`)

var validName = regexp.MustCompile(`^[a-z0-9]{1,16}$`)

// VethPair is two network namespaces, A and B, joined by a veth pair:
// the network path between two containers on one host. A has VethAddrA,
// B has VethAddrB; both have loopback up.
type VethPair struct {
	// NSA and NSB are the namespace names (ip netns list).
	NSA, NSB string
	// LinkA and LinkB are the veth ends inside NSA and NSB.
	LinkA, LinkB string

	once sync.Once
	err  error
}

// ProbeVeth reports whether NewVethPair can work here, without creating
// anything: nil, or an error wrapping ErrUnsupported that says why.
func ProbeVeth() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: needs root (creating network namespaces), running as uid %d", ErrUnsupported, os.Geteuid())
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("%w: no ip command (install iproute2): %v", ErrUnsupported, err)
	}
	return nil
}

// NewVethPair creates namespaces corepin-<pid>-<name>-a and -b, a veth
// pair with one end in each, addresses VethAddrA/30 and VethAddrB/30 on
// the ends, and brings the ends and both loopbacks up. name is 1-16
// lowercase letters and digits. On any error everything it created is
// removed. Close removes the pair.
func NewVethPair(ctx context.Context, name string) (*VethPair, error) {
	if !validName.MatchString(name) {
		return nil, fmt.Errorf("%w: veth pair name %q: want 1-16 lowercase letters and digits", ErrInvalid, name)
	}
	if err := ProbeVeth(); err != nil {
		return nil, err
	}
	base := fmt.Sprintf("%s%d-%s", nsPrefix, os.Getpid(), name)
	v := &VethPair{NSA: base + "-a", NSB: base + "-b", LinkA: vethLinkA, LinkB: vethLinkB}
	steps := [][]string{
		{"netns", "add", v.NSA},
		{"netns", "add", v.NSB},
		{"link", "add", v.LinkA, "netns", v.NSA, "type", "veth", "peer", "name", v.LinkB, "netns", v.NSB},
		{"-n", v.NSA, "addr", "add", prefix(VethAddrA), "dev", v.LinkA},
		{"-n", v.NSB, "addr", "add", prefix(VethAddrB), "dev", v.LinkB},
		{"-n", v.NSA, "link", "set", "lo", "up"},
		{"-n", v.NSB, "link", "set", "lo", "up"},
		{"-n", v.NSA, "link", "set", v.LinkA, "up"},
		{"-n", v.NSB, "link", "set", v.LinkB, "up"},
	}
	for _, s := range steps {
		if err := ip(ctx, s...); err != nil {
			// Cleanup must run even when ctx has ended.
			_ = v.Close()
			return nil, fmt.Errorf("creating veth pair %s: %w", base, err)
		}
	}
	return v, nil
}

func prefix(a netip.Addr) string { return netip.PrefixFrom(a, vethPrefixLen).String() }

// Exec returns argv run inside namespace ns with `ip netns exec`, which
// execs argv directly (same process), with /sys of that namespace.
func Exec(ns string, argv ...string) []string {
	return append([]string{"ip", "netns", "exec", ns}, argv...)
}

// Close removes both namespaces, and with them the veth pair. It is safe to
// call more than once and on a partly created pair; namespaces already gone
// are not an error. Processes still running inside a namespace keep it
// alive (unnamed) until they exit: stop them first.
func (v *VethPair) Close() error {
	v.once.Do(func() {
		var errs []error
		for _, ns := range []string{v.NSA, v.NSB} {
			if err := deleteNS(ns); err != nil {
				errs = append(errs, err)
			}
		}
		v.err = errors.Join(errs...)
	})
	return v.err
}

// deleteNS removes namespace ns; a namespace that does not exist is not an
// error.
func deleteNS(ns string) error {
	if _, err := os.Stat("/run/netns/" + ns); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	err := ip(context.Background(), "netns", "del", ns)
	if err != nil && strings.Contains(err.Error(), "No such file") {
		return nil
	}
	return err
}

// RemoveStale deletes the namespaces an earlier, dead corepin process left
// behind (corepin-<pid>-<name>-a|b whose pid is not running) and returns
// their names. Namespaces of live processes and any other names are left
// alone.
func RemoveStale(ctx context.Context) ([]string, error) {
	if err := ProbeVeth(); err != nil {
		return nil, err
	}
	names, err := ListNamespaces(ctx)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, ns := range names {
		m := nsName.FindStringSubmatch(ns)
		if m == nil {
			continue
		}
		pid, err := strconv.Atoi(m[1])
		if err != nil || pid <= 0 || alive(pid) {
			continue
		}
		if err := deleteNS(ns); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, ns)
	}
	return removed, errors.Join(errs...)
}

// alive reports whether a process with this pid exists.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// ListNamespaces returns the names of the named network namespaces
// (ip netns list).
func ListNamespaces(ctx context.Context) ([]string, error) {
	out, err := ipOutput(ctx, "netns", "list")
	if err != nil {
		return nil, err
	}
	var names []string
	for line := range strings.Lines(string(out)) {
		// "name (id: 3)" or "name".
		if f := strings.Fields(line); len(f) > 0 {
			names = append(names, f[0])
		}
	}
	return names, nil
}

func ip(ctx context.Context, args ...string) error {
	_, err := ipOutput(ctx, args...)
	return err
}

func ipOutput(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "ip", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("running ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
