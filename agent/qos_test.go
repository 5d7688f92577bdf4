package agent

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/internal/testutil"
	"github.com/corepin/corepin/qos"
)

func TestParseConfigQoS(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		want    QoSConfig
		wantErr bool
	}{
		{name: "section", yaml: "qos:\n  enabled: true\n  mechanism: quota\n  threshold: 0.5\n  slice: 1ms\n  burst: true\n",
			want: QoSConfig{Enabled: true, Slice: time.Millisecond, Burst: true, Config: qos.Config{Mechanism: qos.Quota, Threshold: 0.5}}},
		{name: "unknown mechanism", yaml: "qos:\n  mechanism: freeze\n", wantErr: true},
		{name: "slice below the kernel clamp", yaml: "qos:\n  slice: 1us\n", wantErr: true},
		{name: "tick too short", yaml: "qos:\n  tick: 1ms\n", wantErr: true},
		{name: "unknown key", yaml: "qos:\n  thresold: 0.5\n", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseConfig(strings.NewReader(tc.yaml))
			if tc.wantErr {
				if !errors.Is(err, ErrInvalid) {
					t.Errorf("ParseConfig() error = %v, want ErrInvalid", err)
				}
				return
			}
			if err != nil || c.QoS != tc.want {
				t.Errorf("ParseConfig() = %+v, %v; want %+v", c.QoS, err, tc.want)
			}
		})
	}
}

// TestStartQoSReal runs the controller over real groups: an LS workload
// and a BE one. Within a few ticks the status is served and BE's real
// cpuset is non-empty and inside the BE pool.
func TestStartQoSReal(t *testing.T) {
	n, _ := newNode(t)
	if _, err := n.Create(Spec{Name: "svc", CPUs: f64(0.5), Command: "sleep", Args: []string{"600"}}); err != nil {
		t.Fatalf("Create(svc) = %v", err)
	}
	if _, err := n.Create(Spec{Name: "batch", QoS: "BE", CPUs: f64(1), Command: "sleep", Args: []string{"600"}}); err != nil {
		t.Fatalf("Create(batch) = %v", err)
	}
	if n.QoSStatus() != nil {
		t.Fatal("QoSStatus() before StartQoS is not nil")
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := n.StartQoS(ctx, QoSConfig{Enabled: true, Tick: 50 * time.Millisecond, Burst: true}); err != nil {
		t.Fatalf("StartQoS() = %v", err)
	}
	var st *QoSStatus
	testutil.Eventually(t, "three QoS ticks with a BE cpuset", func() bool {
		st = n.QoSStatus()
		return st != nil && st.BECpuset != "" && st.Actions["hold"]+st.Actions["grow"]+st.Actions["shrink"] >= 3
	})
	if st.Error != "" {
		t.Errorf("QoSStatus().Error = %q", st.Error)
	}
	pool, _ := cpuset.Parse(st.BEPool)
	pids, err := enforce.Pids(groupOf(t, n, "batch"))
	if err != nil || len(pids) != 1 {
		t.Fatalf("Pids(batch) = %v, %v", pids, err)
	}
	got, err := cpuset.Parse(allowedList(t, pids[0]))
	if err != nil || got.IsEmpty() || !got.IsSubsetOf(pool) {
		t.Errorf("BE process runs on %s (%v), want a non-empty subset of the BE pool %s", got, err, pool)
	}
	if st.Lever == "" || st.Mechanism != "cpuset" {
		t.Errorf("QoSStatus() lever %q mechanism %q, want a lever and cpuset", st.Lever, st.Mechanism)
	}
}

// FuzzParseConfig: no input makes ParseConfig panic or hang, and a config
// it accepts (qos section included) validates.
func FuzzParseConfig(f *testing.F) {
	f.Add("qos:\n  enabled: true\n  mechanism: quota\n  threshold: 0.5\n  slice: 1ms\n")
	f.Add("reserved_cpus: 0\nqos:\n  tick: 20ms\n  backoff: 0.9\n  runq_high: 1s\n")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseConfig(strings.NewReader(s))
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("ParseConfig accepted %q, Validate = %v", s, err)
		}
		if err := c.QoS.Config.WithDefaults().Validate(); err != nil {
			t.Fatalf("ParseConfig accepted qos %+v: %v", c.QoS, err)
		}
	})
}
