package bench

import (
	"os"
	"testing"

	"github.com/corepin/corepin/enforce"
)

// TestMain lets the test binary serve as enforce.Start's shim.
func TestMain(m *testing.M) {
	enforce.ShimMain()
	os.Exit(m.Run())
}
