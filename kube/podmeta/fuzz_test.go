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
		w, ok := readChecked(t, p)
		if !ok {
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
	})
}

// FuzzReadIsolatedCPUs checks that any value of corepin.io/isolated-cpus,
// with any class and size, gives either an error wrapping ErrInvalid or a
// wish the allocator takes as written, carrying prefer or require only for
// an exclusive class (the shared pools never hold isolated CPUs).
func FuzzReadIsolatedCPUs(f *testing.F) {
	f.Add("prefer", "LSE", "", int64(2000))
	f.Add("require", "", "Guaranteed", int64(1000))
	f.Add("require", "LS", "", int64(1500))
	f.Add("prefer", "", "BestEffort", int64(0))
	f.Add("Require", "LSR", "", int64(4000))
	f.Add("", "", "Guaranteed", int64(3000))
	f.Fuzz(func(t *testing.T, value, label, kubelet string, milli int64) {
		p := Pod{Labels: map[string]string{}, Annotations: map[string]string{AnnotationIsolatedCPUs: value}, Kubelet: KubeletQoS(kubelet), MilliCPUs: milli}
		if label != "" {
			p.Labels[LabelQoSClass] = label
		}
		w, ok := readChecked(t, p)
		if !ok {
			return
		}
		if value != "prefer" && value != "require" {
			t.Fatalf("Read accepted %s %q", AnnotationIsolatedCPUs, value)
		}
		exclusive := w.QoS == alloc.LSE || w.QoS == alloc.LSR
		if exclusive && w.Isolated != value || !exclusive && (w.Isolated != "" || value == "require") {
			t.Fatalf("Read(%+v) = %+v: isolated %q for class %s from %q", p, w, w.Isolated, w.QoS, value)
		}
	})
}

// FuzzReadIRQIsolate checks that any value of corepin.io/irq-isolate,
// with any class and size, gives either an error wrapping ErrInvalid or a
// wish that keeps the value as said: true or false exactly, true only for
// an exclusive class (LSE, LSR).
func FuzzReadIRQIsolate(f *testing.F) {
	f.Add("true", "LSE", "", int64(2000))
	f.Add("false", "", "Guaranteed", int64(1000))
	f.Add("true", "LS", "", int64(1500))
	f.Add("true", "", "BestEffort", int64(0))
	f.Add("True", "LSR", "", int64(4000))
	f.Add("1", "", "Guaranteed", int64(3000))
	f.Fuzz(func(t *testing.T, value, label, kubelet string, milli int64) {
		p := Pod{Labels: map[string]string{}, Annotations: map[string]string{AnnotationIRQIsolate: value}, Kubelet: KubeletQoS(kubelet), MilliCPUs: milli}
		if label != "" {
			p.Labels[LabelQoSClass] = label
		}
		w, ok := readChecked(t, p)
		if !ok {
			return
		}
		if value != "true" && value != "false" {
			t.Fatalf("Read accepted %s %q", AnnotationIRQIsolate, value)
		}
		exclusive := w.QoS == alloc.LSE || w.QoS == alloc.LSR
		if w.IRQIsolate == nil || *w.IRQIsolate != (value == "true") || *w.IRQIsolate && !exclusive {
			t.Fatalf("Read(%+v) = %+v: irq-isolate %v for class %s from %q", p, w, w.IRQIsolate, w.QoS, value)
		}
	})
}

// readChecked reads p as the fuzzers do: an error must wrap ErrInvalid (ok
// is false then), and a wish must be a request the allocator takes as
// written.
func readChecked(t *testing.T, p Pod) (w Wish, ok bool) {
	t.Helper()
	w, err := Read(p)
	if err != nil {
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("Read(%+v) = %v, not ErrInvalid", p, err)
		}
		return w, false
	}
	if _, err := w.RequestSpec().Request("fuzz"); err != nil {
		t.Fatalf("Read(%+v) = %+v, which the allocator refuses: %v", p, w, err)
	}
	return w, true
}
