package experiment

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// KV is one coordinate of a point.
type KV struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Point is one configuration of an experiment's parameter space, its
// coordinates in display order.
type Point []KV

// P builds a point from alternating keys and values.
func P(kv ...any) Point {
	var p Point
	for i := 0; i+1 < len(kv); i += 2 {
		p = append(p, KV{Key: fmt.Sprint(kv[i]), Value: fmt.Sprint(kv[i+1])})
	}
	return p
}

// Get returns the value of key, or "".
func (p Point) Get(key string) string {
	for _, kv := range p {
		if kv.Key == key {
			return kv.Value
		}
	}
	return ""
}

// Label is "k=v k=v".
func (p Point) Label() string {
	parts := make([]string, len(p))
	for i, kv := range p {
		parts[i] = kv.Key + "=" + kv.Value
	}
	return strings.Join(parts, " ")
}

// MarshalJSON encodes a point as an object in coordinate order.
func (p Point) MarshalJSON() ([]byte, error) {
	var b strings.Builder
	b.WriteByte('{')
	for i, kv := range p {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(kv.Key)
		v, _ := json.Marshal(kv.Value)
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return []byte(b.String()), nil
}

// UnmarshalJSON reads a point's object keeping its key order.
func (p *Point) UnmarshalJSON(b []byte) error {
	q, err := ParsePoint(b)
	if err != nil {
		return err
	}
	*p = q
	return nil
}

// ParsePoint decodes a point's JSON object keeping its key order.
func ParsePoint(b []byte) (Point, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("parsing point %s: %w", b, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("parsing point %s: not an object", b)
	}
	var p Point
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("parsing point %s: %w", b, err)
		}
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("parsing point %s: %w", b, err)
		}
		p = append(p, KV{Key: fmt.Sprint(kt), Value: fmt.Sprint(v)})
	}
	return p, nil
}
