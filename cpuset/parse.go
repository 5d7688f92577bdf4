package cpuset

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/corepin/corepin/internal/quote"
)

// trimKernel strips what the kernel and people put around a value: spaces,
// tabs, newlines and the trailing NUL some sysfs *_list files carry.
func trimKernel(s string) string {
	return strings.Trim(s, " \t\r\n\x00")
}

// syntaxErr quotes at most a short prefix of input (quote.Short): the input
// may be a whole file from an untrusted sysfs root.
func syntaxErr(input, format string, args ...any) error {
	return fmt.Errorf("%w %s: %s", ErrSyntax, quote.Short(input), fmt.Sprintf(format, args...))
}

// Parse reads the Linux list format ("0-3,8,10-11", cpuset(7)). Surrounding
// whitespace and NUL bytes are ignored, so a sysfs file's content can be
// passed as read; an empty string is the empty set. Reversed ranges ("3-1"),
// empty elements ("1,,2", "0,"), signs, non-digits and ids above MaxCPU are
// rejected with an error that quotes the input.
func Parse(s string) (CPUSet, error) {
	t := trimKernel(s)
	if t == "" {
		return CPUSet{}, nil
	}
	var b Builder
	for elem := range strings.SplitSeq(t, ",") {
		lo, hi, isRange := strings.Cut(elem, "-")
		a, err := parseID(s, lo)
		if err != nil {
			return CPUSet{}, err
		}
		if !isRange {
			b.Add(a)
			continue
		}
		z, err := parseID(s, hi)
		if err != nil {
			return CPUSet{}, err
		}
		if z < a {
			return CPUSet{}, syntaxErr(s, "range %d-%d is reversed", a, z)
		}
		b.AddRange(a, z)
	}
	return b.Result(), nil
}

func parseID(input, s string) (int, error) {
	if s == "" {
		return 0, syntaxErr(input, "empty element")
	}
	if len(s) > 6 {
		return 0, syntaxErr(input, "cpu id %.12q is out of range [0, %d]", s, MaxCPU)
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return 0, syntaxErr(input, "%s is not a cpu id (want digits, ranges like 0-3, separated by commas)", quote.Short(s))
		}
	}
	v, err := strconv.Atoi(s)
	if err != nil || v > MaxCPU {
		return 0, syntaxErr(input, "cpu id %s is out of range [0, %d]", s, MaxCPU)
	}
	return v, nil
}

// MustParse is Parse for literals in code and tests; it panics on error.
func MustParse(s string) CPUSet {
	c, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return c
}

// ParseMask reads the kernel's cpumask format as written to files such as
// thread_siblings, core_siblings, shared_cpu_map and node cpumap: 32-bit hex
// words, most significant first, separated by commas
// ("00000000,0000ff0f"). Surrounding whitespace and NULs are ignored. Each
// word holds 1 to 8 hex digits; an empty mask, an empty word, non-hex digits
// or a set bit above MaxCPU is an error that quotes the input.
func ParseMask(s string) (CPUSet, error) {
	t := trimKernel(s)
	if t == "" {
		return CPUSet{}, syntaxErr(s, "empty mask")
	}
	words := strings.Split(t, ",")
	if len(words) > (MaxCPU+1)/32 {
		return CPUSet{}, syntaxErr(s, "mask has %d words, more than the %d that fit %d cpus", len(words), (MaxCPU+1)/32, MaxCPU+1)
	}
	w := make([]uint64, (len(words)+1)/2)
	for i, word := range words {
		if word == "" || len(word) > 8 {
			return CPUSet{}, syntaxErr(s, "mask word %s must have 1 to 8 hex digits", quote.Short(word))
		}
		v, err := strconv.ParseUint(word, 16, 32)
		if err != nil {
			return CPUSet{}, syntaxErr(s, "mask word %q is not hexadecimal", word)
		}
		pos := len(words) - 1 - i // 32-bit word index, least significant = 0
		w[pos/2] |= v << (32 * uint(pos%2))
	}
	return fromWords(w), nil
}
