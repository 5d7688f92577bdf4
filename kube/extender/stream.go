package extender

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// The handler reads a body as a stream (issue 17): a json.Decoder walks the
// ExtenderArgs object token by token and hands over each item of
// Nodes.items as soon as it is read, so a call holds one node item, the
// nodes it keeps and their decoded states, never the whole body or a
// corev1.NodeList of it. The shapes are extenderv1.ExtenderArgs and
// corev1.NodeList, read as encoding/json reads them (keys matched without
// regard to case), except that a key given twice, which encoding/json
// would silently overwrite, is refused. DecodeArgs reads through the same
// stream, so the handler and the typed path see the same document.

// readStream reads one ExtenderArgs JSON document from r: exactly one
// object, no keys beyond Pod, Nodes and NodeNames, a pod, and a node list
// of at most maxNodes items. It calls pod once with the raw Pod and then
// node with each raw item of Nodes.items, in order; items read before the
// Pod are held until it comes. The raw item is valid only during the call.
// Errors, its own and the callbacks', wrap ErrBadRequest; a body over its
// MaxBytesReader's bound is an *http.MaxBytesError.
func readStream(r io.Reader, maxNodes int, pod func(raw []byte) error, node func(raw []byte) error) error {
	dec := json.NewDecoder(r)
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: parsing ExtenderArgs: %s", ErrBadRequest, fmt.Sprintf(format, args...))
	}
	readErr := func(err error) error { return streamErr("ExtenderArgs", err) }
	if err := delim(dec, '{'); err != nil {
		return readErr(err)
	}
	var (
		seen     [3]bool // Pod, Nodes, NodeNames
		hasPod   bool
		hasNodes bool
		names    bool
		held     [][]byte // items read before the Pod
		count    int
		raw      json.RawMessage
	)
	item := func(b []byte) error {
		count++
		if count > maxNodes {
			return fmt.Errorf("%w: more than the %d nodes allowed", ErrBadRequest, maxNodes)
		}
		if !hasPod {
			held = append(held, bytes.Clone(b))
			return nil
		}
		return node(b)
	}
	for dec.More() {
		key, err := keyOf(dec)
		if err != nil {
			return readErr(err)
		}
		i := fieldIndex(key, "Pod", "Nodes", "NodeNames")
		if i < 0 {
			return bad("json: unknown field %q", key)
		}
		if seen[i] {
			return bad("key %q given twice", key)
		}
		seen[i] = true
		switch i {
		case 0:
			if err := dec.Decode(&raw); err != nil {
				return readErr(err)
			}
			if string(raw) == "null" {
				continue
			}
			if err := pod(raw); err != nil {
				return err
			}
			hasPod = true
			for _, b := range held {
				if err := node(b); err != nil {
					return err
				}
			}
			held = nil
		case 1:
			has, err := nodeList(dec, &raw, item)
			if err != nil {
				return err
			}
			hasNodes = has
		case 2:
			if err := dec.Decode(&raw); err != nil {
				return readErr(err)
			}
			var list *[]string
			if err := json.Unmarshal(raw, &list); err != nil {
				return bad("NodeNames: %v", err)
			}
			names = list != nil
		}
	}
	if err := delim(dec, '}'); err != nil {
		return readErr(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return readErr(err)
		}
		return bad("trailing data after the JSON object")
	}
	if !hasPod {
		return fmt.Errorf("%w: ExtenderArgs has no Pod", ErrBadRequest)
	}
	if !hasNodes {
		if names {
			return fmt.Errorf("%w: ExtenderArgs has NodeNames but no Nodes: set nodeCacheCapable: false for corepin", ErrBadRequest)
		}
		return fmt.Errorf("%w: ExtenderArgs has no Nodes", ErrBadRequest)
	}
	return nil
}

// nodeList reads the value of Nodes, a corev1.NodeList or null (has is
// false), calling item with each raw item of its items.
func nodeList(dec *json.Decoder, raw *json.RawMessage, item func([]byte) error) (has bool, err error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: parsing Nodes: %s", ErrBadRequest, fmt.Sprintf(format, args...))
	}
	wrap := func(err error) error { return streamErr("Nodes", err) }
	tok, err := dec.Token()
	if err != nil {
		return false, wrap(err)
	}
	if tok == nil {
		return false, nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return false, bad("want a NodeList object, not %v", tok)
	}
	var seen [4]bool // items, metadata, kind, apiVersion
	for dec.More() {
		key, err := keyOf(dec)
		if err != nil {
			return false, wrap(err)
		}
		i := fieldIndex(key, "items", "metadata", "kind", "apiVersion")
		if i >= 0 {
			if seen[i] {
				return false, bad("key %q given twice", key)
			}
			seen[i] = true
		}
		if i != 0 {
			if err := dec.Decode(raw); err != nil {
				return false, wrap(err)
			}
			continue
		}
		tok, err := dec.Token()
		if err != nil {
			return false, wrap(err)
		}
		if tok == nil {
			continue // null items: none
		}
		if d, ok := tok.(json.Delim); !ok || d != '[' {
			return false, bad("items: want a list, not %v", tok)
		}
		for dec.More() {
			if err := dec.Decode(raw); err != nil {
				return false, wrap(err)
			}
			if err := item(*raw); err != nil {
				return false, err
			}
		}
		if err := delim(dec, ']'); err != nil {
			return false, wrap(err)
		}
	}
	if err := delim(dec, '}'); err != nil {
		return false, wrap(err)
	}
	return true, nil
}

// keyOf reads an object's next key.
func keyOf(dec *json.Decoder) (string, error) {
	tok, err := dec.Token()
	if err != nil {
		return "", err
	}
	key, ok := tok.(string)
	if !ok {
		return "", fmt.Errorf("want a key, not %v", tok) // not reached: Token checks the grammar
	}
	return key, nil
}

// delim reads the delimiter d.
func delim(dec *json.Decoder, d json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if got, ok := tok.(json.Delim); !ok || got != d {
		return fmt.Errorf("want %v, not %v", d, tok)
	}
	return nil
}

// fieldIndex is the index of the name key matches as encoding/json
// matches a key to a struct field (exactly, else without regard to
// case), or -1.
func fieldIndex(key string, names ...string) int {
	for i, n := range names {
		if key == n {
			return i
		}
	}
	for i, n := range names {
		if strings.EqualFold(key, n) {
			return i
		}
	}
	return -1
}

// streamErr is err, met reading what, as the handler answers it: a body
// over its bound as such (413), anything else as a bad request.
func streamErr(what string, err error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return fmt.Errorf("reading the request body: %w", err)
	}
	return fmt.Errorf("%w: parsing %s: %w", ErrBadRequest, what, err)
}
