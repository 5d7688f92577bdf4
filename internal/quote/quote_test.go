package quote

import (
	"strings"
	"testing"
)

func TestShort(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{name: "empty", in: "", want: `""`},
		{name: "short", in: "0-3\n", want: `"0-3\n"`},
		{name: "exactly the cap", in: strings.Repeat("a", MaxPrefix), want: `"` + strings.Repeat("a", MaxPrefix) + `"`},
		{name: "long", in: strings.Repeat("s", 1<<20), want: `"` + strings.Repeat("s", MaxPrefix) + `"... (1048576 bytes)`},
		{name: "binary", in: strings.Repeat("\x00", MaxPrefix+1), want: `"` + strings.Repeat(`\x00`, MaxPrefix) + `"... (41 bytes)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Short(tc.in); got != tc.want {
				t.Errorf("Short(%d bytes) = %s, want %s", len(tc.in), got, tc.want)
			}
		})
	}
}
