package enforce

import (
	"os"
	"testing"
)

// TestMain lets the test binary serve as Start's shim.
func TestMain(m *testing.M) {
	ShimMain()
	os.Exit(m.Run())
}
