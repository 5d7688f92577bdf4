package wakescan

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzParseRecord: a record ParseRecord accepts encodes to one it reads
// back the same.
func FuzzParseRecord(f *testing.F) {
	f.Add([]byte(`{"feature":"SIS_UTIL","prior":true,"boot_id":"b","holders":[{"name":"run","owner":"12-34"}]}`))
	f.Add([]byte(`{"feature":"SIS_UTIL","prior":false,"boot_id":"","holders":[]}`))
	f.Add([]byte(`{"feature":"SIS_UTIL","holders":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := ParseRecord(b)
		if err != nil {
			return
		}
		enc, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseRecord(enc)
		if err != nil {
			t.Fatalf("ParseRecord(%s) of an accepted record's encoding: %v", enc, err)
		}
		if d := cmp.Diff(rec, again); d != "" {
			t.Errorf("round trip (-first +again):\n%s", d)
		}
	})
}
