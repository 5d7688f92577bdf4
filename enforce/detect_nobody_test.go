package enforce

import (
	"os"
	"strings"
	"testing"

	"github.com/corepin/corepin/internal/testutil"
)

// Issue 8 §3: as non-root, Detect chose the cgroup driver because
// corepin's root (made earlier by root) exists, and every job then failed
// with permission denied. A user who cannot create groups there gets the
// affinity driver, with the reason first in its Limitations.
func TestDetectAsNobodyFallsBack(t *testing.T) {
	if root := os.Getenv("COREPIN_TEST_DETECT_ROOT"); root != "" {
		d, err := Detect(WithRoot(root))
		if err != nil {
			t.Fatalf("Detect() as uid %d = %v", os.Geteuid(), err)
		}
		if d.Name() != NameAffinity || !strings.Contains(d.Limitations()[0], "permission denied") {
			t.Fatalf("Detect() as uid %d = %s, limitations %q; want affinity, permission denied first", os.Geteuid(), d.Name(), d.Limitations())
		}
		return
	}
	requireRoot(t)
	root := testRoot(t)
	d, err := Detect(WithRoot(root))
	if err != nil {
		t.Fatal(err)
	}
	if d.Name() == NameAffinity {
		t.Skipf("skipping: no writable cgroup even as root: %q", d.Limitations())
	}
	testutil.RunAsNobody(t, "TestDetectAsNobodyFallsBack", "COREPIN_TEST_DETECT_ROOT="+root)
}
