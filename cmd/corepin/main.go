// Command corepin places, pins, sizes and measures CPU workloads on Linux.
// See `corepin --help`.
package main

import (
	"os"

	"github.com/corepin/corepin/cmd/corepin/cli"
	"github.com/corepin/corepin/enforce"
)

func main() {
	// corepin is its own shim when it starts a job inside a cgroup on
	// kernels without CLONE_INTO_CGROUP: see enforce.Start.
	enforce.ShimMain()
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
