package podmeta

import (
	"errors"
	"testing"

	"github.com/corepin/corepin/alloc"
)

// FuzzParseResourceSpec checks that any annotation is either refused with
// ErrInvalid or read into the vocabulary, that what it accepts is a
// request the allocator takes as written, and that reading never panics.
func FuzzParseResourceSpec(f *testing.F) {
	for _, s := range []string{`{}`, `{"preferredCPUBindPolicy":"FullPCPUs","preferredCPUExclusivePolicy":"PCPULevel"}`,
		`{"requiredCPUBindPolicy":"SpreadByPCPUs"}`, `{"a":1}`, `[`, `{"preferredCPUBindPolicy":"FullPCPUs"} x`,
		`{"requiredCPUBindPolicy":"FullPCPUs","preferredCPUBindPolicy":"SpreadByPCPUs"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		rs, err := ParseResourceSpec(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("ParseResourceSpec(%q) = %v, not ErrInvalid", s, err)
			}
			return
		}
		switch rs.Bind() {
		case "", "FullPCPUs", "SpreadByPCPUs":
		default:
			t.Fatalf("ParseResourceSpec(%q) accepted bind %q", s, rs.Bind())
		}
		w, err := Read(Pod{Labels: map[string]string{LabelQoSClass: "LSE"}, Annotations: map[string]string{AnnotationResourceSpec: s}, MilliCPUs: 2000})
		if err != nil {
			t.Fatalf("Read with accepted annotation %q: %v", s, err)
		}
		if _, err := w.RequestSpec().Request("fuzz"); err != nil {
			t.Fatalf("accepted annotation %q gives a request the allocator refuses: %v", s, err)
		}
	})
}

// FuzzRead checks that any labels, annotations, kubelet class and size give
// either a wish the allocator takes as written, of a class corepin admits,
// or an error wrapping ErrInvalid.
func FuzzRead(f *testing.F) {
	f.Add("", "", "", "Guaranteed", int64(2000))
	f.Add("LSR", `{"preferredCPUBindPolicy":"SpreadByPCPUs"}`, "restricted", "", int64(4000))
	f.Add("LSE", "", "single-numa-node", "Burstable", int64(1500))
	f.Add("SYSTEM", "", "", "", int64(1000))
	f.Add("LS", "", "", "BestEffort", int64(0))
	f.Add("", "{}", "Single-NUMA-Node", "Guaranteed", int64(-1))
	f.Fuzz(func(t *testing.T, label, spec, policy, kubelet string, milli int64) {
		p := Pod{Labels: map[string]string{}, Annotations: map[string]string{}, Kubelet: KubeletQoS(kubelet), MilliCPUs: milli}
		if label != "" {
			p.Labels[LabelQoSClass] = label
		}
		if spec != "" {
			p.Annotations[AnnotationResourceSpec] = spec
		}
		if policy != "" {
			p.Annotations[AnnotationNUMAPolicy] = policy
		}
		w, err := Read(p)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Read(%+v) = %v, not ErrInvalid", p, err)
			}
			return
		}
		switch w.QoS {
		case alloc.LSE, alloc.LSR, alloc.LS, alloc.BE:
		default:
			t.Fatalf("Read(%+v) gave class %q", p, w.QoS)
		}
		if w.MilliCPUs < 0 || w.MilliCPUs > MaxMilliCPUs || w.Why == "" {
			t.Fatalf("Read(%+v) = %+v: size outside [0, %d] or no reason", p, w, MaxMilliCPUs)
		}
		if _, err := w.RequestSpec().Request("fuzz"); err != nil {
			t.Fatalf("Read(%+v) = %+v, which the allocator refuses: %v", p, w, err)
		}
	})
}
