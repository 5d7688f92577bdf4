package cli

import (
	"encoding/json"
	"testing"

	"github.com/corepin/corepin/schedext"
)

// TestSchedExtConfig: the command prints the layer config scx_layered
// reads, the same with -o json, and refuses an argument as bad input.
func TestSchedExtConfig(t *testing.T) {
	want, err := schedext.MarshalLayered(schedext.LayeredConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"text", []string{"sched-ext", "config"}, 0},
		{"json", []string{"sched-ext", "config", "-o", "json"}, 0},
		{"extra argument", []string{"sched-ext", "config", "layered.json"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runMain(t, "", tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr %q", code, tc.code, errs)
			}
			if code != 0 {
				return
			}
			if out != string(want) {
				t.Errorf("stdout:\n%s\nwant:\n%s", out, want)
			}
			var layers []schedext.Layer
			if err := json.Unmarshal([]byte(out), &layers); err != nil || len(layers) != 3 {
				t.Errorf("stdout is not the 3 layers: %v", err)
			}
		})
	}
}
