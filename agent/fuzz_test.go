package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/enforce"
)

// FuzzDecodeSpec: DecodeSpec never panics; whatever it accepts is a valid
// Spec with a name that is one safe path element, and it reads back the
// same after encoding. Everything else is ErrInvalid.
func FuzzDecodeSpec(f *testing.F) {
	for _, s := range []string{
		`{"name":"enc-1","qos":"LSE","cpus":4,"bind":"FullPCPUs","exclusive":"PCPULevel","numa":"MostAllocated","topology_policy":"restricted","command":"ffmpeg","args":["-i","in.mp4"]}`,
		`{"name":"web","cpus":1.5,"qos":"LS","pid":4242}`,
		`{"name":"box","cpus":2,"cgroup":"/system.slice/docker-abc.scope"}`,
		`{"name":"../x","cpus":1,"command":"sleep"}`,
		`{"name":"a","cpus":1e308,"command":"sleep"}`,
		`{"name":"a","cpus":1,"command":"sleep"} {}`,
		`{"name":"a","cpus":1,"command":"sleep","extra":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeSpec(bytes.NewReader(b))
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("DecodeSpec error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("accepted spec fails Validate: %v", err)
		}
		if err := enforce.ValidateName(s.Name); err != nil {
			t.Fatalf("accepted name %q is not a safe group name: %v", s.Name, err)
		}
		enc, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeSpec(bytes.NewReader(enc))
		if err != nil {
			t.Fatalf("re-decoding %s: %v", enc, err)
		}
		if d := cmp.Diff(s, back); d != "" {
			t.Fatalf("spec changed through JSON (-first +second):\n%s", d)
		}
	})
}
