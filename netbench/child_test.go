package netbench_test

import (
	"os"

	"github.com/corepin/corepin/cmd/corepin/cli"
)

// The test binary doubles as corepin (`corepin pingpong ...`, parsed by
// the CLI's cobra command) when COREPIN_NETBENCH_TEST_CHILD is 1, so tests
// run ranks as real processes, inside namespaces too.
func init() {
	if os.Getenv("COREPIN_NETBENCH_TEST_CHILD") == "1" {
		os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
}
