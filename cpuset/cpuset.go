package cpuset

import (
	"errors"
	"fmt"
	"iter"
	"math/bits"
	"slices"
	"strconv"
	"strings"
)

// MaxCPU is the largest logical CPU id a CPUSet accepts. Linux caps
// CONFIG_NR_CPUS at 8192 today; the bound leaves room for growth while still
// rejecting ids that can only come from corrupt input.
const MaxCPU = 1<<16 - 1

// ErrSyntax is wrapped by every parse error.
var ErrSyntax = errors.New("invalid cpuset")

// CPUSet is an immutable set of logical CPU ids. The zero value is the empty
// set. Operations return new sets without mutating their receivers, so a
// CPUSet can be shared freely between goroutines.
type CPUSet struct {
	// w holds bit i of word i/64 for CPU i; trailing zero words are trimmed
	// so that equal sets have equal representations.
	w []uint64
}

// New returns the set holding cpus. It panics on an id outside [0, MaxCPU];
// use Parse for untrusted input.
func New(cpus ...int) CPUSet {
	var b Builder
	for _, c := range cpus {
		b.Add(c)
	}
	return b.Result()
}

// Range returns the set {lo, ..., hi}; empty when hi < lo.
func Range(lo, hi int) CPUSet {
	var b Builder
	b.AddRange(lo, hi)
	return b.Result()
}

// Builder accumulates CPUs and yields a CPUSet. It is the only mutable form.
type Builder struct{ w []uint64 }

// Add puts cpu into the builder. It panics on an id outside [0, MaxCPU].
func (b *Builder) Add(cpu int) {
	if cpu < 0 || cpu > MaxCPU {
		panic(fmt.Sprintf("cpuset: cpu id %d outside [0, %d]", cpu, MaxCPU))
	}
	i := cpu / 64
	if i >= len(b.w) {
		b.w = append(b.w, make([]uint64, i+1-len(b.w))...)
	}
	b.w[i] |= 1 << (uint(cpu) % 64)
}

// AddRange adds lo..hi inclusive; nothing when hi < lo.
func (b *Builder) AddRange(lo, hi int) {
	if hi < lo {
		return
	}
	if lo < 0 || hi > MaxCPU {
		panic(fmt.Sprintf("cpuset: range %d-%d outside [0, %d]", lo, hi, MaxCPU))
	}
	if n := hi/64 + 1; n > len(b.w) {
		b.w = append(b.w, make([]uint64, n-len(b.w))...)
	}
	for c := lo; c <= hi; {
		i, off := c/64, uint(c%64)
		span := min(64-int(off), hi-c+1)
		var m uint64
		if span == 64 {
			m = ^uint64(0)
		} else {
			m = ((1 << uint(span)) - 1) << off
		}
		b.w[i] |= m
		c += span
	}
}

// AddSet adds every CPU of s.
func (b *Builder) AddSet(s CPUSet) {
	if len(s.w) > len(b.w) {
		b.w = append(b.w, make([]uint64, len(s.w)-len(b.w))...)
	}
	for i, x := range s.w {
		b.w[i] |= x
	}
}

// Result returns the accumulated set. The builder may be reused afterwards;
// the returned set does not alias it.
func (b *Builder) Result() CPUSet {
	return fromWords(append([]uint64(nil), b.w...))
}

// Word returns word i of s: bit j of it is CPU i*64+j. Past the last CPU
// it is 0. With FromWords it lets packages that keep their own bitmaps
// convert a word at a time instead of a CPU at a time.
func (s CPUSet) Word(i int) uint64 {
	if i < 0 || i >= len(s.w) {
		return 0
	}
	return s.w[i]
}

// FromWords returns the set whose CPU i*64+j is bit j of w[i]. It copies w.
// Words past MaxCPU are dropped, as Parse refuses their ids.
func FromWords(w []uint64) CPUSet {
	return fromWords(slices.Clone(w[:min(len(w), (MaxCPU+1)/64)]))
}

func fromWords(w []uint64) CPUSet {
	n := len(w)
	for n > 0 && w[n-1] == 0 {
		n--
	}
	if n == 0 {
		return CPUSet{}
	}
	return CPUSet{w: w[:n:n]}
}

// Size returns the number of CPUs in s.
func (s CPUSet) Size() int {
	n := 0
	for _, x := range s.w {
		n += bits.OnesCount64(x)
	}
	return n
}

// IsEmpty reports whether s holds no CPU.
func (s CPUSet) IsEmpty() bool { return len(s.w) == 0 }

// Contains reports whether cpu is in s.
func (s CPUSet) Contains(cpu int) bool {
	if cpu < 0 {
		return false
	}
	i := cpu / 64
	return i < len(s.w) && s.w[i]&(1<<(uint(cpu)%64)) != 0
}

// Equals reports whether s and o hold the same CPUs.
func (s CPUSet) Equals(o CPUSet) bool {
	if len(s.w) != len(o.w) {
		return false
	}
	for i := range s.w {
		if s.w[i] != o.w[i] {
			return false
		}
	}
	return true
}

// IsSubsetOf reports whether every CPU of s is in o.
func (s CPUSet) IsSubsetOf(o CPUSet) bool {
	if len(s.w) > len(o.w) {
		return false
	}
	for i, x := range s.w {
		if x&^o.w[i] != 0 {
			return false
		}
	}
	return true
}

// Intersects reports whether s and o share at least one CPU.
func (s CPUSet) Intersects(o CPUSet) bool {
	for i := range min(len(s.w), len(o.w)) {
		if s.w[i]&o.w[i] != 0 {
			return true
		}
	}
	return false
}

// Union returns s ∪ o.
func (s CPUSet) Union(o CPUSet) CPUSet {
	a, b := s.w, o.w
	if len(a) < len(b) {
		a, b = b, a
	}
	if len(b) == 0 {
		return CPUSet{w: a}
	}
	w := append([]uint64(nil), a...)
	for i, x := range b {
		w[i] |= x
	}
	return CPUSet{w: w}
}

// Intersection returns s ∩ o.
func (s CPUSet) Intersection(o CPUSet) CPUSet {
	n := min(len(s.w), len(o.w))
	w := make([]uint64, n)
	for i := range n {
		w[i] = s.w[i] & o.w[i]
	}
	return fromWords(w)
}

// Difference returns s \ o.
func (s CPUSet) Difference(o CPUSet) CPUSet {
	if len(s.w) == 0 || len(o.w) == 0 {
		return s
	}
	w := append([]uint64(nil), s.w...)
	for i := range min(len(w), len(o.w)) {
		w[i] &^= o.w[i]
	}
	return fromWords(w)
}

// IntersectionSize returns |s ∩ o| without building the intersection.
func (s CPUSet) IntersectionSize(o CPUSet) int {
	n := 0
	for i := range min(len(s.w), len(o.w)) {
		n += bits.OnesCount64(s.w[i] & o.w[i])
	}
	return n
}

// All iterates the CPUs of s in ascending order.
func (s CPUSet) All() iter.Seq[int] {
	return func(yield func(int) bool) {
		for i, x := range s.w {
			for x != 0 {
				t := bits.TrailingZeros64(x)
				if !yield(i*64 + t) {
					return
				}
				x &= x - 1
			}
		}
	}
}

// List returns the CPUs of s in ascending order.
func (s CPUSet) List() []int {
	out := make([]int, 0, s.Size())
	for c := range s.All() {
		out = append(out, c)
	}
	return out
}

// Min returns the lowest CPU of s, or -1 when s is empty.
func (s CPUSet) Min() int {
	for i, x := range s.w {
		if x != 0 {
			return i*64 + bits.TrailingZeros64(x)
		}
	}
	return -1
}

// Max returns the highest CPU of s, or -1 when s is empty.
func (s CPUSet) Max() int {
	if len(s.w) == 0 {
		return -1
	}
	i := len(s.w) - 1
	return i*64 + 63 - bits.LeadingZeros64(s.w[i])
}

// String formats s in the Linux list format (cpuset(7) "List Format"), e.g.
// "0-3,8,10-11"; the empty set formats as "".
func (s CPUSet) String() string {
	var sb strings.Builder
	lo, prev := -1, -2
	flush := func() {
		if lo < 0 {
			return
		}
		if sb.Len() > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(strconv.Itoa(lo))
		if prev > lo {
			sb.WriteByte('-')
			sb.WriteString(strconv.Itoa(prev))
		}
	}
	for c := range s.All() {
		if c != prev+1 {
			flush()
			lo = c
		}
		prev = c
	}
	flush()
	return sb.String()
}

// MarshalText encodes s in list format, so CPU sets are strings in JSON.
func (s CPUSet) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText parses the list format.
func (s *CPUSet) UnmarshalText(b []byte) error {
	p, err := Parse(string(b))
	if err != nil {
		return err
	}
	*s = p
	return nil
}

// Mask formats s the way the kernel writes cpumask files such as
// thread_siblings: 32-bit hex words, most significant first, separated by
// commas ("00000000,0000ff0f"). The empty set formats as "00000000".
func (s CPUSet) Mask() string {
	nwords := max(1, (s.Max()+32)/32)
	var sb strings.Builder
	for i := nwords - 1; i >= 0; i-- {
		var word uint32
		if i/2 < len(s.w) {
			word = uint32(s.w[i/2] >> (32 * uint(i%2)))
		}
		fmt.Fprintf(&sb, "%08x", word)
		if i > 0 {
			sb.WriteByte(',')
		}
	}
	return sb.String()
}
