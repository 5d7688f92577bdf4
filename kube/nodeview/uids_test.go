package nodeview

import (
	"fmt"
	"testing"
)

// TestUIDSet: the set holds exactly the UIDs it was made of, a UUID's
// other spellings (upper case) and UIDs of no UUID form included.
func TestUIDSet(t *testing.T) {
	const a, b = "00000000-0000-4000-8000-000000000001", "c0ffee00-1234-4abc-8def-0123456789ab"
	s := newUIDSet(map[string]struct{}{a: {}, b: {}, "not-a-uuid": {}, "C0FFEE00-1234-4ABC-8DEF-0123456789AB": {}})
	if !s.names || s.len() != 4 {
		t.Fatalf("set names %v, holds %d; want true, 4", s.names, s.len())
	}
	for _, tc := range []struct {
		uid  string
		want bool
	}{
		{uid: a, want: true},
		{uid: b, want: true},
		{uid: "not-a-uuid", want: true},
		{uid: "C0FFEE00-1234-4ABC-8DEF-0123456789AB", want: true},
		{uid: "00000000-0000-4000-8000-000000000002"},
		{uid: "00000000-0000-4000-8000-00000000000A"}, // upper case of none held
		{uid: "00000000-0000-4000-8000-00000000000"},
		{uid: ""},
	} {
		t.Run(tc.uid, func(t *testing.T) {
			if got := s.has(tc.uid); got != tc.want {
				t.Errorf("has(%q) = %v, want %v", tc.uid, got, tc.want)
			}
		})
	}
	if none := newUIDSet(nil); none.names || none.has(a) {
		t.Errorf("the set of a state naming no pods: names %v, has(%q) %v", none.names, a, none.has(a))
	}
}

// FuzzParseUUID: a text read as a UUID is its canonical lowercase text.
func FuzzParseUUID(f *testing.F) {
	for _, s := range []string{"00000000-0000-4000-8000-000000000001", "C0FFEE00-1234-4ABC-8DEF-0123456789AB", "", "x", "0000000000000-4000-8000-0000000000011"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, ok := parseUUID(s)
		if !ok {
			return
		}
		if back := fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16]); back != s {
			t.Fatalf("parseUUID(%q) = %x, which reads %q", s, u, back)
		}
	})
}
