// Command corepin places, pins, sizes and measures CPU workloads on Linux.
// See `corepin --help`.
package main

import (
	"os"

	"github.com/corepin/corepin/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
