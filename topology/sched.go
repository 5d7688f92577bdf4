package topology

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Files of the running kernel's scheduler that decide where a waking task
// lands, read through the same root as the topology.
const (
	// schedFeaturesFile lists the fair class's feature bits, one token
	// each, "NO_" before those switched off (debugfs, root only;
	// kernel/sched/debug.c, sched_feat_show). SIS_UTIL (Linux 6.0) cuts the
	// idle-CPU scan of a waking task short when its L3 is busy.
	schedFeaturesFile = "sys/kernel/debug/sched/features"
	// schedExtStateFile and schedExtOpsFile name the state of sched_ext
	// and the BPF scheduler attached
	// (https://docs.kernel.org/scheduler/sched-ext.html, "Switching to
	// and from sched_ext").
	schedExtStateFile = "sys/kernel/sched_ext/state"
	schedExtOpsFile   = "sys/kernel/sched_ext/root/ops"
	// osReleaseFile is the kernel release of a dump (uname -r).
	osReleaseFile = "proc/sys/kernel/osrelease"
)

// MaxFeatures bounds the tokens of a features file; Linux 6.18 has about
// 30.
const MaxFeatures = 256

// ErrBadFeatures is wrapped by errors about a features file's content.
var ErrBadFeatures = errors.New("bad scheduler features")

// BE routes as `corepin bench wakeup` names them: how a best-effort batch
// is kept behind other work.
const (
	RouteNone       = "none"        // no batch
	RouteSchedIdle  = "sched_idle"  // SCHED_IDLE on every batch thread
	RouteCPUIdle    = "cpu_idle"    // the batch's group has cpu.idle 1
	RouteIdleParent = "idle_parent" // under corepin's idle BE parent (corepin-be)
	RouteWeight     = "weight"      // the batch's group at the lowest weight
	// RouteLayered only places: the batch under corepin's idle BE parent
	// (scx_layered's "be" layer), the service in a group under corepin's
	// root (its "ls" layer); whatever scheduler is attached decides.
	// InertRoutes never lists it: under the fair class it is the idle
	// parent route, and under scx_layered on corepin's config the layers
	// act on it.
	RouteLayered = "layered"
)

// Scheduler is what the running kernel's scheduler does with a waking
// task that this machine lets corepin see: `corepin topo`'s "scheduler"
// section. A pointer is nil (JSON null) where it is unknown.
type Scheduler struct {
	// Kernel is the release (uname -r).
	Kernel *string `json:"kernel"`
	// FeaturesReadable and FeaturesWritable say whether the fair class's
	// features file could be read and opened for writing (it is root
	// only, and absent without debugfs).
	FeaturesReadable bool `json:"features_readable"`
	FeaturesWritable bool `json:"features_writable"`
	// SISUtil is whether the utilisation-sized idle-CPU scan is on: nil
	// where the features are unreadable or the kernel predates it.
	SISUtil  *bool    `json:"sis_util"`
	SchedExt SchedExt `json:"sched_ext"`
	// InertRoutes are the BE routes the kernel or the attached scheduler
	// ignores (see InertRoutes); never null.
	InertRoutes []string `json:"inert_routes"`
	// Notes say why a field is unknown (a parse error), for stderr.
	Notes []string `json:"-"`
}

// SchedExt is sched_ext's state ("disabled", "enabling", "enabled",
// "disabling") and the name of the BPF scheduler attached ("" when none);
// both nil on a kernel without sched_ext.
type SchedExt struct {
	State *string `json:"state"`
	Ops   *string `json:"ops"`
}

// Attached reports whether a sched_ext scheduler is attached or being
// attached or detached: every state but "disabled".
func (s SchedExt) Attached() bool { return s.State != nil && *s.State != "disabled" }

// InertRoutes is the documented rule of which BE routes cannot act: while
// a sched_ext scheduler is attached the kernel ignores cpu.idle (so the
// cpu_idle and idle_parent routes do nothing) and most BPF schedulers
// ignore cpu.weight (sched-ext/scx issue #800), so the weight route does
// nothing either. SCHED_IDLE per thread is the BPF scheduler's to honour
// and is not listed. Without sched_ext every route acts.
func InertRoutes(ext SchedExt) []string {
	if !ext.Attached() {
		return []string{}
	}
	return []string{RouteCPUIdle, RouteIdleParent, RouteWeight}
}

// SchedFeaturesFile is the fair class's features file under a root (see
// schedFeaturesFile): what package wakescan writes.
const SchedFeaturesFile = schedFeaturesFile

// ReadSchedFeatures reads the features file under r, confined to r,
// opened non-blocking, a regular file of at most MaxFileSize bytes, and
// parses it (ParseFeatures). A missing file's error wraps
// fs.ErrNotExist, an unreadable one's fs.ErrPermission.
func ReadSchedFeatures(r *os.Root) (map[string]bool, error) {
	data, err := readFile(rootFS{r}, schedFeaturesFile)
	if err != nil {
		return nil, fmt.Errorf("reading scheduler features: %w", err)
	}
	return ParseFeatures(data)
}

// SchedFeaturesWritable reports whether the features file under r is a
// regular file this process may open for writing (nothing is written).
func SchedFeaturesWritable(r *os.Root) bool { return rootFS{r}.canWrite(schedFeaturesFile) }

// ParseFeatures parses the features file: whitespace-separated tokens of
// upper-case letters, digits and "_", each a feature, "NO_" before one
// that is off. It returns each feature's state. Empty content, a bad
// token, a feature named twice or more than MaxFeatures tokens are errors
// wrapping ErrBadFeatures.
func ParseFeatures(data []byte) (map[string]bool, error) {
	fields := bytes.Fields(data)
	if len(fields) == 0 {
		return nil, fmt.Errorf("parsing scheduler features: %w: no features", ErrBadFeatures)
	}
	if len(fields) > MaxFeatures {
		return nil, fmt.Errorf("parsing scheduler features: %w: %d features, over %d", ErrBadFeatures, len(fields), MaxFeatures)
	}
	out := make(map[string]bool, len(fields))
	for _, f := range fields {
		name, on := string(f), true
		if n, ok := strings.CutPrefix(name, "NO_"); ok {
			name, on = n, false
		}
		if !validFeature(name) {
			return nil, fmt.Errorf("parsing scheduler features: %w: token %q", ErrBadFeatures, truncate(string(f), 64))
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("parsing scheduler features: %w: %s named twice", ErrBadFeatures, name)
		}
		out[name] = on
	}
	return out, nil
}

func validFeature(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		if (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// writeChecker is the optional ability of a root to say whether a file
// could be opened for writing, without writing.
type writeChecker interface {
	canWrite(name string) bool
}

// canWrite opens name for writing and closes it at once: writing to the
// features file acts only on write(2), never on open.
func (f rootFS) canWrite(name string) bool {
	file, err := f.r.OpenFile(name, os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return false
	}
	st, err := file.Stat()
	ok := err == nil && st.Mode().IsRegular()
	_ = file.Close()
	return ok
}

// ReadScheduler reads the scheduler section from fsys (a root holding
// sys/), each file bounded as discovery reads it; kernel is the release
// (nil: unknown). A missing file leaves its field unknown; an unreadable
// or malformed one does too and adds a note saying why.
func ReadScheduler(fsys fs.FS, kernel *string) Scheduler {
	s := Scheduler{Kernel: kernel}
	note := func(err error) {
		if !errors.Is(err, fs.ErrNotExist) {
			s.Notes = append(s.Notes, err.Error())
		}
	}
	if data, err := readFile(fsys, schedFeaturesFile); err != nil {
		if !errors.Is(err, fs.ErrPermission) {
			note(fmt.Errorf("reading scheduler features: %w", err))
		}
	} else if feats, err := ParseFeatures(data); err != nil {
		note(err)
	} else {
		s.FeaturesReadable = true
		if on, ok := feats["SIS_UTIL"]; ok {
			s.SISUtil = &on
		}
	}
	if wc, ok := fsys.(writeChecker); ok {
		s.FeaturesWritable = wc.canWrite(schedFeaturesFile)
	}
	var err error
	if s.SchedExt, err = ReadSchedExt(fsys); err != nil {
		note(err)
	}
	s.InertRoutes = InertRoutes(s.SchedExt)
	return s
}

// ReadSchedExt reads sched_ext's state and attached scheduler from fsys
// (a root holding sys/). A kernel without sched_ext (no state file) gives
// both nil and no error. An unreadable or malformed state file leaves
// both nil; an ops file missing beside a state gives ops "" (none
// attached), an unreadable one ops "" and the error.
func ReadSchedExt(fsys fs.FS) (SchedExt, error) {
	st, err := readWord(fsys, schedExtStateFile)
	if errors.Is(err, fs.ErrNotExist) {
		return SchedExt{}, nil
	}
	if err != nil {
		return SchedExt{}, fmt.Errorf("reading sched_ext state: %w", err)
	}
	ops := ""
	o, err := readWord(fsys, schedExtOpsFile)
	switch {
	case err == nil:
		ops = o
	case errors.Is(err, fs.ErrNotExist):
		err = nil
	default:
		err = fmt.Errorf("reading sched_ext ops: %w", err)
	}
	return SchedExt{State: &st, Ops: &ops}, err
}

// OpenSchedExt is ReadSchedExt of the machine whose "/" is root ("" or
// "/": this one), confined to root.
func OpenSchedExt(root string) (SchedExt, error) {
	if root == "" {
		root = "/"
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return SchedExt{}, fmt.Errorf("%w %s: %w", ErrBadRoot, root, err)
	}
	defer r.Close()
	return ReadSchedExt(rootFS{r})
}

// readWord reads a one-line sysfs attribute of at most 128 printable
// bytes (a state, a scheduler's name).
func readWord(fsys fs.FS, name string) (string, error) {
	data, err := readFile(fsys, name)
	if err != nil {
		return "", err
	}
	w := strings.TrimSpace(string(data))
	if len(w) > 128 || strings.ContainsFunc(w, func(r rune) bool { return r < 0x21 || r > 0x7e }) {
		return "", &fs.PathError{Op: "parse", Path: name, Err: fmt.Errorf("not one printable word: %q", truncate(w, 64))}
	}
	return w, nil
}

// OpenScheduler reads the scheduler section of the machine whose "/" is
// root, confined to root as Open is. The live machine's kernel is
// uname's; a dump's is its proc/sys/kernel/osrelease, when it has one.
func OpenScheduler(root string) (Scheduler, error) {
	live := root == "" || root == "/"
	if live {
		root = "/"
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return Scheduler{}, fmt.Errorf("%w %s: %w", ErrBadRoot, root, err)
	}
	defer r.Close()
	fsys := rootFS{r}
	var kernel *string
	if live {
		var u unix.Utsname
		if err := unix.Uname(&u); err == nil {
			k := unix.ByteSliceToString(u.Release[:])
			kernel = &k
		}
	} else if k, err := readWord(fsys, osReleaseFile); err == nil {
		kernel = &k
	}
	return ReadScheduler(fsys, kernel), nil
}

// RenderScheduler writes the text view of s for machine t, briefly: the
// kernel, the idle-CPU scan, sched_ext, and what SMT and the L3 groups
// mean for a waking task (it searches its own L3 for an idle CPU, where
// SIS_UTIL may cut the search short; an SMT sibling is checked apart).
func RenderScheduler(w io.Writer, s Scheduler, t *Topology) error {
	var b strings.Builder
	kernel := "unknown"
	if s.Kernel != nil {
		kernel = *s.Kernel
	}
	feats := "unreadable (root and debugfs needed)"
	switch {
	case s.FeaturesReadable && s.FeaturesWritable:
		feats = "readable, writable"
	case s.FeaturesReadable:
		feats = "readable, not writable"
	}
	sis := "unknown"
	if s.SISUtil != nil {
		sis = map[bool]string{true: "on (the idle-CPU scan stops early on a busy L3)", false: "off (full idle-CPU scan)"}[*s.SISUtil]
	}
	ext := "not in this kernel"
	if s.SchedExt.State != nil {
		ext = *s.SchedExt.State
		if s.SchedExt.Ops != nil && *s.SchedExt.Ops != "" {
			ext += " (" + *s.SchedExt.Ops + ")"
		}
	}
	fmt.Fprintf(&b, "Wake placement: kernel %s; scheduler features %s; SIS_UTIL %s; sched_ext %s\n", kernel, feats, sis, ext)
	if t != nil {
		smt := "no SMT: no idle-sibling check"
		if n := t.ThreadsPerCore(); n > 1 {
			smt = fmt.Sprintf("SMT%d: an idle sibling is checked whatever SIS_UTIL says", n)
		}
		l3 := "no shared L3: the idle-CPU scan covers the waker's LLC domain only"
		if n := t.NumL3(); n > 0 {
			var groups []string
			for i := range n {
				groups = append(groups, t.L3CPUs(CacheID(i)).String())
			}
			l3 = fmt.Sprintf("%s (cpus %s): a waking task is scanned for an idle CPU within its L3", plural(n, "L3 group", "L3 groups"), strings.Join(groups, " | "))
		}
		fmt.Fprintf(&b, "  %s; %s\n", smt, l3)
	}
	if len(s.InertRoutes) > 0 {
		fmt.Fprintf(&b, "  BE routes that cannot act under sched_ext: %s\n", strings.Join(s.InertRoutes, ", "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}
