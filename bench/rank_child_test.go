package bench_test

import (
	"os"

	"github.com/corepin/corepin/cmd/corepin/cli"
)

// The test binary doubles as corepin when COREPIN_BENCH_TEST_PINGPONG is 1
// (the oversubscription tests' ranks: `corepin pingpong ...`, parsed by the
// CLI's cobra command). Under enforce's shim (proc pinning a rank) it is the
// shim first: TestMain's ShimMain execs the rank, which lands here again.
func init() {
	if os.Getenv("COREPIN_BENCH_TEST_PINGPONG") == "1" && os.Getenv("COREPIN_ENFORCE_SHIM") == "" {
		os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
}
