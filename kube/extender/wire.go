package extender

import (
	"bytes"
	"encoding/json"

	"github.com/corepin/corepin/kube/nodestate"
)

// The handler's fast path reads a node item without building a
// corev1.Node: decoding 100 published topologies into Node objects, twice
// per filter and prioritize pair, and encoding them back was most of a
// call's time (issue 13). The stream decoder (readStream) has checked the
// item is valid JSON; a walker over it finds its name, annotations and
// Koordinator labels, the only fields corepin judges by. The filter answer
// carries the kept items as the scheduler sent them. An item the walker
// does not read exactly as encoding/json would (a key in another case, a
// key given twice, an escape in a key, a value of another type) is
// decoded into a corev1.Node instead, as the typed path does.

// rawNode is one node item of the body as sent.
type rawNode struct {
	raw  []byte // the item, as sent
	name string
	// ann holds the raw (still quoted and escaped) JSON strings of the
	// annotations corepin reads.
	ann [4][]byte // AnnotationTopology, AnnotationAssigned, AnnotationNUMAFree, AnnotationAllocator
	// label holds the raw JSON strings of Koordinator's node labels.
	label [3][]byte // nodestate.LabelKoordCPUBindPolicy, nodestate.LabelKoordNUMATopologyPolicy, nodestate.LabelKoordNUMAAllocateStrategy
}

// walker reads a well-formed JSON document (json.Valid passed).
type walker struct {
	b []byte
	i int
}

func (w *walker) ws() {
	for w.i < len(w.b) {
		switch w.b[w.i] {
		case ' ', '\t', '\n', '\r':
			w.i++
		default:
			return
		}
	}
}

// str skips the string at w.i and returns it with its quotes, and whether
// it holds an escape. A quote ends the string unless an odd number of
// backslashes precede it.
func (w *walker) str() ([]byte, bool) {
	start := w.i
	w.i++
	for {
		w.i += bytes.IndexByte(w.b[w.i:], '"')
		bs := 0
		for j := w.i - 1; j > start && w.b[j] == '\\'; j-- {
			bs++
		}
		w.i++
		if bs%2 == 0 {
			s := w.b[start:w.i]
			return s, bytes.IndexByte(s, '\\') >= 0
		}
	}
}

// skip skips the value at w.i and returns its bytes.
func (w *walker) skip() []byte {
	w.ws()
	start := w.i
	switch w.b[w.i] {
	case '"':
		w.str()
	case '{', '[':
		depth := 0
		for {
			switch w.b[w.i] {
			case '"':
				w.str()
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
			w.i++
			if depth == 0 {
				break
			}
		}
	default: // number, true, false, null
	literal:
		for ; w.i < len(w.b); w.i++ {
			switch w.b[w.i] {
			case ' ', '\t', '\n', '\r', ',', '}', ']':
				break literal
			}
		}
	}
	return w.b[start:w.i]
}

// object calls fn for each member of the object at w.i (fn must consume
// the value); it returns false when the value is not an object or fn
// returns false.
func (w *walker) object(fn func(key []byte) bool) bool {
	w.ws()
	if w.b[w.i] != '{' {
		return false
	}
	w.i++
	for {
		w.ws()
		if w.b[w.i] == '}' {
			w.i++
			return true
		}
		if w.b[w.i] == ',' {
			w.i++
			w.ws()
		}
		k, esc := w.str()
		if esc {
			return false // encoding/json would unescape it: leave it to the strict path
		}
		w.ws()
		w.i++ // ':'
		w.ws()
		if !fn(k[1 : len(k)-1]) {
			return false
		}
	}
}

// isNull reports whether the value at w.i is null, and skips it if so.
func (w *walker) isNull() bool {
	w.ws()
	if bytes.HasPrefix(w.b[w.i:], []byte("null")) {
		w.i += 4
		return true
	}
	return false
}

// member tracks the keys of one object: a key that encoding/json would
// match to a wanted one without being it exactly, or a key given twice,
// sends the body to the strict path. A member is always asked for the same
// names (at most 32): seen has bit i set once names[i] was seen, so reading
// an object allocates nothing.
type member struct{ seen uint32 }

func (m *member) want(key []byte, names ...string) (string, bool) {
	for i, n := range names {
		if string(key) == n {
			if m.seen&(1<<i) != 0 {
				return "", false
			}
			m.seen |= 1 << i
			return n, true
		}
		if bytes.EqualFold(key, []byte(n)) {
			return "", false
		}
	}
	return "", true // another key
}

// readNode reads one node item (valid JSON: the stream decoder read it)
// the fast way; ok is false when the typed path must read it (unusual or
// not the shape the walker reads).
func readNode(item []byte) (rawNode, bool) {
	w := &walker{b: item}
	n, ok := w.node()
	return n, ok
}

// node reads one node item: its metadata's name and annotations.
func (w *walker) node() (rawNode, bool) {
	w.ws()
	start := w.i
	var n rawNode
	var m member
	ok := w.object(func(k []byte) bool {
		name, ok := m.want(k, "metadata")
		if !ok {
			return false
		}
		if name == "" {
			w.skip()
			return true
		}
		if w.isNull() {
			return true
		}
		var mm member
		return w.object(func(k []byte) bool {
			name, ok := mm.want(k, "name", "annotations", "labels")
			switch {
			case !ok:
				return false
			case name == "name":
				if w.b[w.i] != '"' {
					return false
				}
				s, esc := w.str()
				if esc {
					return json.Unmarshal(s, &n.name) == nil
				}
				n.name = string(s[1 : len(s)-1])
				return true
			case name == "annotations":
				if w.isNull() {
					return true
				}
				var am member
				return w.object(func(k []byte) bool {
					name, ok := am.want(k, AnnotationTopology, AnnotationAssigned, AnnotationNUMAFree, AnnotationAllocator)
					if !ok {
						return false
					}
					w.ws()
					if w.b[w.i] != '"' {
						return false // encoding/json refuses a non-string annotation
					}
					v, _ := w.str()
					switch name {
					case AnnotationTopology:
						n.ann[0] = v
					case AnnotationAssigned:
						n.ann[1] = v
					case AnnotationNUMAFree:
						n.ann[2] = v
					case AnnotationAllocator:
						n.ann[3] = v
					}
					return true
				})
			case name == "labels":
				if w.isNull() {
					return true
				}
				var lm member
				return w.object(func(k []byte) bool {
					name, ok := lm.want(k, nodestate.LabelKoordCPUBindPolicy, nodestate.LabelKoordNUMATopologyPolicy, nodestate.LabelKoordNUMAAllocateStrategy)
					if !ok {
						return false
					}
					w.ws()
					if w.b[w.i] != '"' {
						return false // encoding/json refuses a non-string label
					}
					v, _ := w.str()
					switch name {
					case nodestate.LabelKoordCPUBindPolicy:
						n.label[0] = v
					case nodestate.LabelKoordNUMATopologyPolicy:
						n.label[1] = v
					case nodestate.LabelKoordNUMAAllocateStrategy:
						n.label[2] = v
					}
					return true
				})
			}
			w.skip()
			return true
		})
	})
	n.raw = w.b[start:w.i]
	return n, ok
}
