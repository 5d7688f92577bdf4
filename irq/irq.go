package irq

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/corepin/corepin/cpuset"
)

// Dir is the directory of the interrupts under a root (proc(5)).
const Dir = "proc/irq"

// AffinityFile is an interrupt's affinity, in list format, under Dir/N:
// the CPUs it may be delivered to; writing it moves the interrupt
// (Documentation/core-api/irq/irq-affinity.rst).
const AffinityFile = "smp_affinity_list"

// EffectiveFile is the CPUs an interrupt is delivered to now (Linux
// >= 4.15; absent before).
const EffectiveFile = "effective_affinity_list"

// Bounds of what List reads.
const (
	// MaxIRQs bounds the interrupts listed (Linux's NR_IRQS is at most a
	// few thousand beyond the CPUs' vectors).
	MaxIRQs = 1 << 14
	// MaxFileSize bounds one affinity file: a list of 65536 CPUs in the
	// worst spelling stays below it.
	MaxFileSize = 64 << 10
)

// Errors of List and Probe.
var (
	// ErrUnavailable is wrapped where this machine's interrupts cannot be
	// steered: no Dir, or its files not writable by this user.
	ErrUnavailable = errors.New("interrupts cannot be steered here")
	// ErrBadAffinity is wrapped where an affinity file is not a list of
	// CPUs, is empty, or is too large.
	ErrBadAffinity = errors.New("malformed interrupt affinity")
)

// IRQ is one interrupt as Dir shows it.
type IRQ struct {
	N int `json:"irq"`
	// Affinity is where it may be delivered (smp_affinity_list).
	Affinity cpuset.CPUSet `json:"affinity"`
	// Effective is where it is delivered now (effective_affinity_list);
	// HasEffective is false where the kernel has no such file.
	Effective    cpuset.CPUSet `json:"effective"`
	HasEffective bool          `json:"-"`
}

// ParseAffinity reads an affinity file's content: a non-empty Linux list
// ("0-3,8"), with the newline and NUL the kernel may add. Errors wrap
// ErrBadAffinity.
func ParseAffinity(b []byte) (cpuset.CPUSet, error) {
	if len(b) > MaxFileSize {
		return cpuset.CPUSet{}, fmt.Errorf("%w: larger than %d bytes", ErrBadAffinity, MaxFileSize)
	}
	s, err := cpuset.Parse(string(b))
	if err != nil {
		return cpuset.CPUSet{}, fmt.Errorf("%w: %w", ErrBadAffinity, err)
	}
	if s.IsEmpty() {
		return cpuset.CPUSet{}, fmt.Errorf("%w: no CPU", ErrBadAffinity)
	}
	return s, nil
}

// openRoot opens root ("" is "/").
func openRoot(root string) (*os.Root, error) {
	if root == "" {
		root = "/"
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, fmt.Errorf("%w: opening root %s: %w", ErrUnavailable, root, err)
	}
	return r, nil
}

// List reads every interrupt under root ("" or "/": this machine), in
// order: each directory of Dir named by a number, with its affinity file
// (an interrupt without one, such as irq 0 on some machines, is left
// out). Files are read only if regular and at most MaxFileSize bytes; a
// malformed affinity is an error naming the interrupt. More than MaxIRQs
// interrupts is an error.
func List(root string) ([]IRQ, error) {
	r, err := openRoot(root)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return list(r)
}

func list(r *os.Root) ([]IRQ, error) {
	ents, err := fs.ReadDir(r.FS(), Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: no /%s (procfs not mounted there)", ErrUnavailable, Dir)
	}
	if err != nil {
		return nil, fmt.Errorf("listing interrupts: %w", err)
	}
	var irqs []IRQ
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil || n < 0 || strconv.Itoa(n) != e.Name() || !e.IsDir() {
			continue // default_smp_affinity and the like
		}
		if len(irqs) == MaxIRQs {
			return nil, fmt.Errorf("listing interrupts: more than %d", MaxIRQs)
		}
		b, err := readFile(r, path.Join(Dir, e.Name(), AffinityFile))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading irq %d: %w", n, err)
		}
		aff, err := ParseAffinity(b)
		if err != nil {
			return nil, fmt.Errorf("reading irq %d %s: %w", n, AffinityFile, err)
		}
		q := IRQ{N: n, Affinity: aff}
		b, err = readFile(r, path.Join(Dir, e.Name(), EffectiveFile))
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return nil, fmt.Errorf("reading irq %d: %w", n, err)
		default:
			// An interrupt never started has an empty effective set.
			if q.Effective, err = cpuset.Parse(string(b)); err != nil {
				return nil, fmt.Errorf("reading irq %d %s: %w: %w", n, EffectiveFile, ErrBadAffinity, err)
			}
			q.HasEffective = true
		}
		irqs = append(irqs, q)
	}
	slices.SortFunc(irqs, func(a, b IRQ) int { return a.N - b.N })
	return irqs, nil
}

// readFile reads name under r if it is a regular file of at most
// MaxFileSize bytes (the size stat reports is not trusted: procfs says 0).
func readFile(r *os.Root, name string) ([]byte, error) {
	f, err := r.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w: not a regular file", name, ErrBadAffinity)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxFileSize {
		return nil, fmt.Errorf("%s: %w: larger than %d bytes", name, ErrBadAffinity, MaxFileSize)
	}
	return b, nil
}

// ProbeError is Probe's error: Short says why in a few words with what to
// do, for a one-line note; the error itself says it in full.
type ProbeError struct {
	Short string
	Err   error
}

func (e *ProbeError) Error() string { return e.Err.Error() }
func (e *ProbeError) Unwrap() error { return e.Err }

// Probe says whether this user can steer the interrupts under root: nil
// where Dir lists interrupts whose affinity files it may write. It writes
// nothing. Its error is a *ProbeError wrapping ErrUnavailable or
// ErrBadAffinity.
func Probe(root string) error {
	if root == "" {
		root = "/"
	}
	irqs, err := List(root)
	switch {
	case errors.Is(err, ErrUnavailable):
		return &ProbeError{Short: "no /" + Dir, Err: err}
	case err != nil:
		return &ProbeError{Short: "interrupts unreadable", Err: err}
	case len(irqs) == 0:
		return &ProbeError{Short: "no interrupts listed", Err: fmt.Errorf("%w: /%s lists no interrupt", ErrUnavailable, Dir)}
	}
	for _, q := range irqs {
		p := path.Join(root, Dir, strconv.Itoa(q.N), AffinityFile)
		if err := unix.Access(p, unix.W_OK); err == nil {
			return nil
		}
	}
	return &ProbeError{Short: "/" + Dir + " not writable (run as root)",
		Err: fmt.Errorf("%w: the affinity files of /%s are not writable by this user: run as root (in a container: privileged, with the host's /proc/irq)", ErrUnavailable, Dir)}
}

// refused reports whether the kernel refused an affinity write for this
// interrupt alone: EIO (per-CPU, managed or otherwise unmovable
// interrupts: irq_can_set_affinity_usr) or EINVAL (no online CPU left,
// or a chip that cannot take the mask).
func refused(err error) bool {
	return errors.Is(err, syscall.EIO) || errors.Is(err, syscall.EINVAL)
}

// writeAffinity writes set into interrupt n's affinity file under r.
func writeAffinity(r *os.Root, n int, set cpuset.CPUSet) error {
	name := path.Join(Dir, strconv.Itoa(n), AffinityFile)
	f, err := r.OpenFile(name, os.O_WRONLY|os.O_TRUNC|syscall.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return fmt.Errorf("%s: %w: not a regular file", name, ErrBadAffinity)
	}
	_, werr := f.WriteString(set.String() + "\n")
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	return werr
}
