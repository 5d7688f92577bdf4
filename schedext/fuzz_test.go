package schedext_test

import (
	"encoding/json"
	"testing"

	"github.com/corepin/corepin/schedext"
)

// FuzzParseRecord: whatever the state file holds under the key
// sched_ext, ParseRecord never panics, and a record it accepts encodes
// to one it reads back the same.
func FuzzParseRecord(f *testing.F) {
	spec := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	f.Add([]byte(`{"pid":42,"start":7,"comm":"scx_layered","spec":"` + spec + `"}`))
	f.Add([]byte(`{"pid":-1,"start":7,"comm":"scx_layered","spec":"` + spec + `"}`))
	f.Add([]byte(`{"pid":42,"start":18446744073709551615,"comm":"a","spec":"` + spec + `"} `))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"pid":1e3}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := schedext.ParseRecord(b)
		if err != nil {
			return
		}
		out, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		back, err := schedext.ParseRecord(out)
		if err != nil || back != r {
			t.Fatalf("ParseRecord(%s) = %+v; encoded %s reads back %+v, %v", b, r, out, back, err)
		}
	})
}
