package cpuset

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []int
	}{
		{name: "empty", in: "", want: nil},
		{name: "kernel newline", in: "0-3\n", want: []int{0, 1, 2, 3}},
		{name: "trailing NUL", in: "0,2\x00", want: []int{0, 2}},
		{name: "spaces", in: "  1,3-4 \n", want: []int{1, 3, 4}},
		{name: "mixed", in: "0-3,8,10-11", want: []int{0, 1, 2, 3, 8, 10, 11}},
		{name: "unsorted and overlapping", in: "8,0-2,1", want: []int{0, 1, 2, 8}},
		{name: "single range", in: "5-5", want: []int{5}},
		{name: "word boundary", in: "62-65", want: []int{62, 63, 64, 65}},
		{name: "large machine", in: "4095", want: []int{4095}},
		{name: "max id", in: "65535", want: []int{MaxCPU}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.in)
			if err != nil {
				t.Fatalf("Parse(%q) error: %v", tc.in, err)
			}
			if !slices.Equal(got.List(), tc.want) && !(len(tc.want) == 0 && got.IsEmpty()) {
				t.Errorf("Parse(%q) = %v, want %v", tc.in, got.List(), tc.want)
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	for _, in := range []string{"3-1", "a", "1,,2", "0,", ",0", "-1", "1-", "-", "0-3-5", "+1", "1 2", "65536", "99999999999999999999", "0x3", "1.5", "٣"} {
		t.Run(in, func(t *testing.T) {
			_, err := Parse(in)
			if err == nil {
				t.Fatalf("Parse(%q) = nil error, want one", in)
			}
			if !errors.Is(err, ErrSyntax) {
				t.Errorf("Parse(%q) error %v does not wrap ErrSyntax", in, err)
			}
			if !strings.Contains(err.Error(), strings.TrimSpace(in)) && len(in) < 20 {
				t.Errorf("Parse(%q) error %q does not quote the input", in, err)
			}
		})
	}
}

func TestString(t *testing.T) {
	tests := []struct {
		name string
		set  CPUSet
		want string
	}{
		{name: "empty", set: CPUSet{}, want: ""},
		{name: "single", set: New(7), want: "7"},
		{name: "pairs stay ranges", set: New(0, 1, 3), want: "0-1,3"},
		{name: "ranges", set: New(0, 1, 2, 3, 8, 10, 11), want: "0-3,8,10-11"},
		{name: "across words", set: Range(60, 130), want: "60-130"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.set.String(); got != tc.want {
				t.Errorf("String() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestParseMask(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{name: "thread siblings", in: "00000000,00000101\n", want: "0,8"},
		{name: "low word", in: "0000ff0f", want: "0-3,8-15"},
		{name: "two words", in: "00000001,00000000", want: "32"},
		{name: "three words", in: "00000001,00000000,80000000", want: "31,64"},
		{name: "short word", in: "f", want: "0-3"},
		{name: "zero", in: "00000000", want: ""},
		{name: "NUL", in: "3\x00", want: "0-1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseMask(tc.in)
			if err != nil {
				t.Fatalf("ParseMask(%q) error: %v", tc.in, err)
			}
			if got.String() != tc.want {
				t.Errorf("ParseMask(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestParseMaskRejects(t *testing.T) {
	for _, in := range []string{"", "\n", "g", "0x1", "1,,2", "123456789", ",1", "1,", "-1", "+1", "ff ff"} {
		if _, err := ParseMask(in); err == nil || !errors.Is(err, ErrSyntax) {
			t.Errorf("ParseMask(%q) error = %v, want ErrSyntax", in, err)
		}
	}
	// A bit above MaxCPU is rejected through the word count bound.
	big := "1" + strings.Repeat(",00000000", (MaxCPU+1)/32)
	if _, err := ParseMask(big); err == nil {
		t.Errorf("ParseMask(%d words) = nil error, want one", (MaxCPU+1)/32+1)
	}
}

func TestMask(t *testing.T) {
	for _, tc := range []struct{ list, mask string }{
		{"", "00000000"},
		{"0,8", "00000101"},
		{"0-3,8-15", "0000ff0f"},
		{"32", "00000001,00000000"},
		{"31,64", "00000001,00000000,80000000"},
		{"63", "80000000,00000000"},
	} {
		if got := MustParse(tc.list).Mask(); got != tc.mask {
			t.Errorf("MustParse(%q).Mask() = %q, want %q", tc.list, got, tc.mask)
		}
	}
}

func TestAlgebra(t *testing.T) {
	a := MustParse("0-5,64-70")
	b := MustParse("4-8,70,200")
	if got, want := a.Union(b).String(), "0-8,64-70,200"; got != want {
		t.Errorf("Union = %q, want %q", got, want)
	}
	if got, want := a.Intersection(b).String(), "4-5,70"; got != want {
		t.Errorf("Intersection = %q, want %q", got, want)
	}
	if got, want := a.Difference(b).String(), "0-3,64-69"; got != want {
		t.Errorf("Difference = %q, want %q", got, want)
	}
	if got, want := b.Difference(a).String(), "6-8,200"; got != want {
		t.Errorf("Difference = %q, want %q", got, want)
	}
	if got := a.IntersectionSize(b); got != 3 {
		t.Errorf("IntersectionSize = %d, want 3", got)
	}
	if !a.Intersects(b) || a.Intersects(MustParse("100")) {
		t.Errorf("Intersects wrong")
	}
	if !MustParse("4-5").IsSubsetOf(a) || b.IsSubsetOf(a) {
		t.Errorf("IsSubsetOf wrong")
	}
	if a.Min() != 0 || a.Max() != 70 || (CPUSet{}).Min() != -1 || (CPUSet{}).Max() != -1 {
		t.Errorf("Min/Max = %d/%d", a.Min(), a.Max())
	}
	// Operations never mutate their operands.
	if a.String() != "0-5,64-70" || b.String() != "4-8,70,200" {
		t.Errorf("operands mutated: a=%q b=%q", a, b)
	}
	// Difference that empties the high words compares equal to a short set.
	if d := MustParse("1,200").Difference(MustParse("200")); !d.Equals(New(1)) {
		t.Errorf("Difference left trailing words: %v", d)
	}
	if !a.Intersection(MustParse("300")).Equals(CPUSet{}) {
		t.Errorf("empty intersection is not the zero set")
	}
}

func TestWords(t *testing.T) {
	s := New(0, 63, 64, 130)
	for i, want := range []uint64{1 | 1<<63, 1, 1 << 2, 0} {
		if got := s.Word(i); got != want {
			t.Errorf("Word(%d) of %s = %#x, want %#x", i, s, got, want)
		}
	}
	if s.Word(-1) != 0 {
		t.Error("Word(-1) is not 0")
	}
	w := []uint64{0, 1 << 5, 0}
	got := FromWords(w)
	w[1] = 1 // FromWords copies
	if got.String() != "69" || !got.Equals(New(69)) {
		t.Errorf("FromWords = %q, want 69 with no trailing words", got)
	}
	huge := make([]uint64, (MaxCPU+1)/64+3)
	huge[len(huge)-1], huge[0] = 1, 1
	if got := FromWords(huge); !got.Equals(New(0)) {
		t.Errorf("FromWords past MaxCPU = %q, want 0", got)
	}
}

func TestBuilderResultDoesNotAlias(t *testing.T) {
	var b Builder
	b.Add(1)
	s := b.Result()
	b.Add(2)
	if s.String() != "1" {
		t.Errorf("Result aliased builder: %q", s)
	}
}

func TestJSONText(t *testing.T) {
	var s CPUSet
	if err := s.UnmarshalText([]byte("0-2")); err != nil || s.String() != "0-2" {
		t.Fatalf("UnmarshalText = %v, %v", s, err)
	}
	if err := s.UnmarshalText([]byte("2-0")); err == nil {
		t.Fatalf("UnmarshalText(2-0) = nil error")
	}
	if s.String() != "0-2" {
		t.Errorf("failed UnmarshalText changed the value to %q", s)
	}
}

func BenchmarkUnion(b *testing.B) {
	x, y := MustParse("0-127"), MustParse("64-255")
	for b.Loop() {
		_ = x.Union(y)
	}
}

func BenchmarkParse(b *testing.B) {
	for b.Loop() {
		_, _ = Parse("0-63,128-191,256,258,260-300")
	}
}

// An error quotes at most a short prefix of the input: the input may be a
// whole file from a hostile sysfs root (issue 8 §3, a link to a secret file).
func TestParseErrorQuotesOnlyAPrefix(t *testing.T) {
	secret := "0-3,SECRET-" + strings.Repeat("x", 1<<16)
	tests := []struct {
		name  string
		parse func(string) (CPUSet, error)
	}{
		{name: "list", parse: Parse},
		{name: "mask", parse: ParseMask},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.parse(secret)
			if err == nil {
				t.Fatal("nil error, want one")
			}
			if n := len(err.Error()); n > 400 {
				t.Errorf("error is %d bytes long, want at most 400: %.120s...", n, err)
			}
		})
	}
}
