package cpuset

import "testing"

// FuzzParse checks that Parse never panics and that String is its inverse:
// Parse(Parse(x).String()) holds the same CPUs as Parse(x).
func FuzzParse(f *testing.F) {
	for _, s := range []string{"", "0", "0-3,8,10-11", "0-3\n", "1,,2", "3-1", "65535", "0-63,64-127\x00", " 7 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		set, err := Parse(s)
		if err != nil {
			return
		}
		again, err := Parse(set.String())
		if err != nil {
			t.Fatalf("Parse(%q).String() = %q does not parse: %v", s, set.String(), err)
		}
		if !again.Equals(set) {
			t.Fatalf("round trip of %q: %q != %q", s, again, set)
		}
		if m, err := ParseMask(set.Mask()); err != nil || !m.Equals(set) {
			t.Fatalf("mask round trip of %q: %q, %v", set, m, err)
		}
		var w []uint64
		for i := 0; set.Word(i) != 0 || i <= set.Max()>>6; i++ {
			w = append(w, set.Word(i))
		}
		if got := FromWords(append(w, 0, 0)); !got.Equals(set) {
			t.Fatalf("word round trip of %q: %q", set, got)
		}
	})
}

// FuzzParseMask checks that ParseMask never panics and that Mask is its
// inverse.
func FuzzParseMask(f *testing.F) {
	for _, s := range []string{"00000000,00000101\n", "0000ff0f", "f", "00000001,00000000,80000000", ",", "g", "ffffffff,ffffffff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		set, err := ParseMask(s)
		if err != nil {
			return
		}
		again, err := ParseMask(set.Mask())
		if err != nil {
			t.Fatalf("ParseMask(%q).Mask() = %q does not parse: %v", s, set.Mask(), err)
		}
		if !again.Equals(set) {
			t.Fatalf("round trip of %q: %q != %q", s, again.Mask(), set.Mask())
		}
		if l, err := Parse(set.String()); err != nil || !l.Equals(set) {
			t.Fatalf("list round trip of %q: %q, %v", s, l, err)
		}
	})
}
