// Package cli holds corepin's command-line front door: one file per command,
// each a thin layer over the library packages. Exit codes are decided in one
// place (Main): 2 for bad input, 1 for a failure of the system, 0 otherwise.
package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/corepin/corepin/runner"
	"github.com/corepin/corepin/store"
)

// Version is set at build time with -ldflags "-X .../cmd/corepin/cli.Version=...".
var Version = "dev"

// UsageError marks bad input from the user: exit code 2.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Usagef returns a UsageError with a formatted message.
func Usagef(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...)}
}

// commands registers every subcommand constructor; each command file adds
// its own in an init function, so commands stay independent of each other.
var commands []func(*env) *cobra.Command

func register(f func(*env) *cobra.Command) { commands = append(commands, f) }

// env is what every command shares: its streams and the global flags.
type env struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	output string // -o text|json
}

// JSON reports whether -o json was asked for.
func (e *env) JSON() bool { return e.output == "json" }

// PrintJSON writes v as indented JSON with a trailing newline.
func (e *env) PrintJSON(v any) error {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// NewRoot builds the corepin command tree writing to the given streams.
func NewRoot(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:   "corepin",
		Short: "Topology-aware CPU placement, pinning and measurement for Linux",
		Long: `corepin reads the CPU topology, decides which logical CPUs each workload
gets (whole physical cores, one NUMA node, one L3 where possible), enforces
that with cgroups, sizes each job's threads to what it got, and measures the
outcome on this machine.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			switch e.output {
			case "text", "json":
				return nil
			}
			return Usagef("unknown output format %q: use -o text or -o json", e.output)
		},
	}
	setVersion(root)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().StringVarP(&e.output, "output", "o", "text", "output format: text or json")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &UsageError{Err: err} })
	for _, f := range commands {
		root.AddCommand(f(e))
	}
	return root
}

// Main runs corepin with args and returns the process exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := NewRoot(stdin, stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return 0
	}
	msg := strings.ReplaceAll(err.Error(), "\n", " ")
	fmt.Fprintf(stderr, "corepin: %s\n", msg)
	if isUsage(err) {
		return 2
	}
	return 1
}

// isUsage reports whether err is the user's input: a UsageError, cobra's
// own argument errors, or a core package's sentinel for bad input that a
// command passed up unwrapped.
func isUsage(err error) bool {
	var ue *UsageError
	return errors.As(err, &ue) || isCobraUsage(err) ||
		errors.Is(err, runner.ErrSpec) || errors.Is(err, store.ErrPlace)
}

// isCobraUsage recognises cobra's own argument errors, which are plain errors.
func isCobraUsage(err error) bool {
	s := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand", "accepts ", "requires at least", "requires at most", "invalid argument"} {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}
