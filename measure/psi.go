package measure

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"strconv"
	"syscall"
	"time"
)

// PSIFile is the system-wide CPU pressure file, relative to the procfs root.
// Per-group pressure lives in a cgroup v2 directory as cpu.pressure. See
// https://docs.kernel.org/accounting/psi.html.
const PSIFile = "pressure/cpu"

// PSILine is one line of a PSI file: the share of time (percent) in which
// some (or all) non-idle tasks stalled on the resource, averaged over 10, 60
// and 300 seconds, and the total stall time since boot.
type PSILine struct {
	Avg10, Avg60, Avg300 float64
	Total                time.Duration
}

// PSI is the content of a pressure file. The "full" line is absent for CPU
// on kernels before 5.13, and at the system level it reads zero.
type PSI struct {
	Some    PSILine
	Full    PSILine
	HasFull bool
}

// ReadPSI reads and parses the pressure file at path in fsys. When the
// kernel lacks PSI (no such file) or has it switched off (EOPNOTSUPP, the
// psi=0 boot option) the error wraps ErrNotSupported as well as the cause.
func ReadPSI(fsys fs.FS, path string) (PSI, error) {
	data, err := fs.ReadFile(fsys, path)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.EOPNOTSUPP) {
		return PSI{}, fmt.Errorf("reading pressure: %w: %w", ErrNotSupported, err)
	}
	if err != nil {
		return PSI{}, fmt.Errorf("reading pressure: %w", err)
	}
	return ParsePSI(data)
}

// ParsePSI parses the content of a pressure file: a "some" line and an
// optional "full" line, each with avg10, avg60, avg300 and total (µs).
func ParsePSI(data []byte) (PSI, error) {
	var p PSI
	haveSome := false
	for line := range bytes.Lines(data) {
		line = bytes.TrimRight(line, "\n")
		if len(line) == 0 {
			continue
		}
		kind, rest, _ := bytes.Cut(line, []byte(" "))
		var dst *PSILine
		switch string(kind) {
		case "some":
			if haveSome {
				return PSI{}, fmt.Errorf("parsing pressure: some repeated: %w", errFormat)
			}
			dst, haveSome = &p.Some, true
		case "full":
			if p.HasFull {
				return PSI{}, fmt.Errorf("parsing pressure: full repeated: %w", errFormat)
			}
			dst, p.HasFull = &p.Full, true
		default:
			return PSI{}, fmt.Errorf("parsing pressure line %q: %w", line, errFormat)
		}
		l, err := parsePSILine(rest)
		if err != nil {
			return PSI{}, fmt.Errorf("parsing pressure %s: %w", kind, err)
		}
		*dst = l
	}
	if !haveSome {
		return PSI{}, fmt.Errorf("parsing pressure: no some line: %w", errFormat)
	}
	return p, nil
}

func parsePSILine(b []byte) (PSILine, error) {
	var l PSILine
	seen := 0
	for _, kv := range bytes.Fields(b) {
		k, v, ok := bytes.Cut(kv, []byte("="))
		if !ok {
			return l, fmt.Errorf("field %q: %w", kv, errFormat)
		}
		var bit int
		switch string(k) {
		case "avg10", "avg60", "avg300":
			f, err := strconv.ParseFloat(string(v), 64)
			if err != nil || math.IsNaN(f) || f < 0 || f > 100 {
				return l, fmt.Errorf("field %q: %w", kv, errFormat)
			}
			switch string(k) {
			case "avg10":
				l.Avg10, bit = f, 1
			case "avg60":
				l.Avg60, bit = f, 2
			default:
				l.Avg300, bit = f, 4
			}
		case "total":
			n, ok := parseUint(v)
			if !ok || n > math.MaxInt64/uint64(time.Microsecond) {
				return l, fmt.Errorf("field %q: %w", kv, errFormat)
			}
			l.Total, bit = time.Duration(n)*time.Microsecond, 8
		default:
			return l, fmt.Errorf("field %q: %w", kv, errFormat)
		}
		if seen&bit != 0 {
			return l, fmt.Errorf("field %q repeated: %w", k, errFormat)
		}
		seen |= bit
	}
	if seen != 15 {
		return l, fmt.Errorf("want avg10, avg60, avg300 and total: %w", errFormat)
	}
	return l, nil
}

// PSIDelta is the stall time a pressure file accrued between two reads.
type PSIDelta struct {
	Some    time.Duration // time in which at least one task stalled
	Full    time.Duration // time in which all non-idle tasks stalled
	HasFull bool
}

// PSISub returns after minus before, or ErrCounterReset when a total went
// backwards.
func PSISub(before, after PSI) (PSIDelta, error) {
	d := PSIDelta{Some: after.Some.Total - before.Some.Total, HasFull: before.HasFull && after.HasFull}
	if d.HasFull {
		d.Full = after.Full.Total - before.Full.Total
	}
	if d.Some < 0 || d.Full < 0 {
		return PSIDelta{}, fmt.Errorf("subtracting pressure: %w", ErrCounterReset)
	}
	return d, nil
}
