package podmeta

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corepin/corepin/alloc"
)

func TestReadLowLatency(t *testing.T) {
	for _, tc := range []struct {
		name string
		ann  map[string]string
		q    alloc.QoS
		want LowLatency
		err  string
	}{{
		name: "none",
		q:    alloc.LSE,
	}, {
		name: "both false on an LSE pod",
		ann:  map[string]string{AnnotationLoadBalance: "false", AnnotationCPUQuota: "false"},
		q:    alloc.LSE,
		want: LowLatency{NoLoadBalance: true, NoCPUQuota: true},
	}, {
		name: "true is the default",
		ann:  map[string]string{AnnotationLoadBalance: "true", AnnotationCPUQuota: "true"},
		q:    alloc.LS,
	}, {
		name: "quota only, LSR",
		ann:  map[string]string{AnnotationCPUQuota: "false"},
		q:    alloc.LSR,
		want: LowLatency{NoCPUQuota: true},
	}, {
		name: "CRI-O's value is not corepin's",
		ann:  map[string]string{AnnotationLoadBalance: "disable"},
		q:    alloc.LSE,
		err:  `annotation corepin.io/load-balance "disable": use "false"`,
	}, {
		name: "spelled otherwise",
		ann:  map[string]string{AnnotationCPUQuota: "False"},
		q:    alloc.LSE,
		err:  `annotation corepin.io/cpu-quota "False"`,
	}, {
		name: "a shared pod",
		ann:  map[string]string{AnnotationLoadBalance: "false"},
		q:    alloc.LS,
		err:  "annotation corepin.io/load-balance false takes CPUs of the pod's own out of the scheduler's balancing; this pod is LS",
	}, {
		name: "a BE pod's quota",
		ann:  map[string]string{AnnotationCPUQuota: "false"},
		q:    alloc.BE,
		err:  "annotation corepin.io/cpu-quota false lifts the quota on CPUs of the pod's own; this pod is BE",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadLowLatency(tc.ann, tc.q)
			if tc.err != "" {
				if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ReadLowLatency() error = %v, want ErrInvalid saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ReadLowLatency() (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzReadLowLatency checks that any pair of values is refused with
// ErrInvalid or read as exactly "false" asks, and never panics.
func FuzzReadLowLatency(f *testing.F) {
	for _, s := range [][3]string{{"false", "false", "LSE"}, {"true", "", "LS"}, {"disable", "x", "BE"}, {"", "false", "LSR"}} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, lb, quota, q string) {
		ann := map[string]string{}
		if lb != "" {
			ann[AnnotationLoadBalance] = lb
		}
		if quota != "" {
			ann[AnnotationCPUQuota] = quota
		}
		ll, err := ReadLowLatency(ann, alloc.QoS(q))
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("ReadLowLatency(%q) = %v, not ErrInvalid", ann, err)
			}
			return
		}
		if ll.NoLoadBalance != (lb == "false") || ll.NoCPUQuota != (quota == "false") {
			t.Fatalf("ReadLowLatency(%q) = %+v", ann, ll)
		}
		if (ll.NoLoadBalance || ll.NoCPUQuota) && q != "LSE" && q != "LSR" {
			t.Fatalf("ReadLowLatency(%q) accepted false for class %q", ann, q)
		}
	})
}
