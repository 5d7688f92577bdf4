package irq

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/cpuset"
)

// FuzzParseAffinity: an accepted affinity is a non-empty set whose list
// form reads back the same.
func FuzzParseAffinity(f *testing.F) {
	for _, s := range []string{"0-7\n", "2-7\x00\n", "0,2,4-5", "", "\n", "3-1", "ff", "0-65535", "1,,2", " 4 "} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseAffinity(b)
		if err != nil {
			return
		}
		if s.IsEmpty() {
			t.Fatalf("ParseAffinity(%q) accepted an empty set", b)
		}
		again, err := ParseAffinity([]byte(s.String()))
		if err != nil || !again.Equals(s) {
			t.Fatalf("ParseAffinity(%q) = %s, read back as %s, %v", b, s, again, err)
		}
	})
}

// FuzzParseRecord: a record ParseRecord accepts encodes to one it reads
// back the same.
func FuzzParseRecord(f *testing.F) {
	f.Add([]byte(`{"boot_id":"b","prior":[{"irqs":"10,14","affinity":"0-7"}],"holders":[{"name":"run","owner":"12-34","id":"job-0","cpus":"4-5"}]}`))
	f.Add([]byte(`{"boot_id":"","prior":[],"holders":[]}`))
	f.Add([]byte(`{"prior":null,"holders":null}`))
	f.Add([]byte(`{"boot_id":"b","prior":[{"irqs":"10","affinity":"0-7","set":"0-3,6-7"},{"irqs":"11","affinity":"0-7"}],"holders":[]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, _, err := parseRecord(b)
		if err != nil {
			return
		}
		enc, err := json.Marshal(st.record())
		if err != nil {
			t.Fatal(err)
		}
		again, _, err := parseRecord(enc)
		if err != nil {
			t.Fatalf("parseRecord(%s) of an accepted record's encoding: %v", enc, err)
		}
		eq := cmp.Comparer(cpuset.CPUSet.Equals)
		if d := cmp.Diff(st.prior, again.prior, eq); d != "" {
			t.Errorf("round trip of the prior affinities (-first +again):\n%s", d)
		}
		if d := cmp.Diff(st.set, again.set, eq); d != "" {
			t.Errorf("round trip of the affinities set (-first +again):\n%s", d)
		}
	})
}
