package schedext

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Modes of the node setting sched_ext.
const (
	// ModeOff runs no BPF scheduler (the default); an agent started with
	// it stops the scx_layered an earlier agent left running.
	ModeOff = "off"
	// ModeLayered runs and supervises scx_layered on LayeredConfig.
	ModeLayered = "layered"
)

// Modes are the values Setting.Mode takes, for errors and help.
var Modes = []string{ModeOff, ModeLayered}

// DefaultBinary is the program Setting.Binary names when it is empty:
// looked up in PATH.
const DefaultBinary = "scx_layered"

// Bounds of Setting.Args.
const (
	MaxArgs   = 64
	MaxArgLen = 1024
)

// ErrBadSetting is wrapped by Setting.Validate's errors.
var ErrBadSetting = errors.New("bad sched_ext setting")

// Setting is the node setting sched_ext of the agent's config: which BPF
// scheduler corepin runs (Mode), the scx_layered binary, and arguments
// put before the config's (f:FILE), which corepin adds itself.
type Setting struct {
	Mode   string   `yaml:"mode" json:"mode"`
	Binary string   `yaml:"binary" json:"binary,omitempty"`
	Args   []string `yaml:"args" json:"args,omitempty"`
}

// Enabled reports whether s asks for a scheduler.
func (s Setting) Enabled() bool { return s.Mode == ModeLayered }

// Validate checks s and returns it with Binary resolved: an unknown
// mode, a binary that is not an absolute path to an executable regular
// file, more than MaxArgs arguments, one longer than MaxArgLen bytes or
// holding a NUL, or an argument naming a layer config (corepin passes
// its own) are errors wrapping ErrBadSetting that say what to give. With
// mode off (or empty) nothing else is checked.
func (s Setting) Validate() (Setting, error) {
	bad := func(format string, a ...any) (Setting, error) {
		return Setting{}, fmt.Errorf("%w: "+format, append([]any{ErrBadSetting}, a...)...)
	}
	switch s.Mode {
	case "", ModeOff:
		if s.Binary != "" || len(s.Args) > 0 {
			return bad("sched_ext.binary and args are used only with mode %s: set mode: %s or remove them", ModeLayered, ModeLayered)
		}
		s.Mode = ModeOff
		return s, nil
	case ModeLayered:
	default:
		return bad("sched_ext.mode %.64q: want %s", s.Mode, strings.Join(Modes, " or "))
	}
	if len(s.Args) > MaxArgs {
		return bad("sched_ext.args: %d arguments, at most %d", len(s.Args), MaxArgs)
	}
	for i, a := range s.Args {
		switch {
		case len(a) > MaxArgLen:
			return bad("sched_ext.args[%d]: longer than %d bytes", i, MaxArgLen)
		case strings.ContainsRune(a, 0):
			return bad("sched_ext.args[%d]: holds a NUL byte", i)
		case strings.HasPrefix(a, "f:"), strings.HasPrefix(a, "file:"):
			return bad("sched_ext.args[%d] %.64q names a layer config: corepin passes its own (corepin sched-ext config); remove it", i, a)
		case inlineSpec(a):
			return bad("sched_ext.args[%d] %.64q is an inline layer config: corepin passes its own (corepin sched-ext config); remove it", i, a)
		}
	}
	if s.Binary == "" {
		p, err := exec.LookPath(DefaultBinary)
		if err != nil {
			return bad("sched_ext.binary unset and %s is not in PATH: install scx_layered (scripts/vm-scx-layered.sh builds one) and give its path, e.g. binary: /usr/local/bin/scx_layered", DefaultBinary)
		}
		if s.Binary, err = filepath.Abs(p); err != nil {
			return bad("sched_ext.binary: resolving %s: %v", p, err)
		}
	}
	if err := checkBinary(s.Binary); err != nil {
		return bad("%v", err)
	}
	return s, nil
}

// checkBinary refuses a path that is not absolute or not an executable
// regular file (symbolic links followed).
func checkBinary(p string) error {
	if !filepath.IsAbs(p) || len(p) > 4096 {
		return fmt.Errorf("sched_ext.binary %.128q: give an absolute path, e.g. /usr/local/bin/scx_layered", p)
	}
	st, err := os.Stat(p)
	if err != nil {
		return fmt.Errorf("sched_ext.binary: %w: install scx_layered there or give its path", err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("sched_ext.binary %s is not a regular file (%s): give the scx_layered program itself", p, st.Mode().Type())
	}
	if st.Mode().Perm()&0o111 == 0 || unix.Access(p, unix.X_OK) != nil {
		return fmt.Errorf("sched_ext.binary %s is not executable by this user: chmod +x it, or run the agent as root", p)
	}
	return nil
}

// inlineSpec reports whether a is a layer config written out in place:
// scx_layered reads every argument that is not an option as its layer
// specs, from a file after f: or file:, else as JSON text (an array of
// layers; an object is refused here too, as what a user meant by it is a
// layer), which would stand beside, or instead of, corepin's own.
func inlineSpec(a string) bool {
	t := strings.TrimLeft(a, " \t\r\n")
	return strings.HasPrefix(t, "[") || strings.HasPrefix(t, "{")
}
