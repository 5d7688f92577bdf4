package proc

import (
	"sync"
)

// Tail is an io.Writer that keeps the last Limit bytes written to it. It
// is safe for concurrent use (os/exec writes from its own goroutine).
type Tail struct {
	mu    sync.Mutex
	buf   []byte
	limit int
	total int64
}

// NewTail returns a Tail keeping the last limit bytes.
func NewTail(limit int) *Tail { return &Tail{limit: max(limit, 0)} }

// Write keeps the end of p; it never fails.
func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.total += int64(len(p))
	if len(p) >= t.limit {
		t.buf = append(t.buf[:0], p[len(p)-t.limit:]...)
		return len(p), nil
	}
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.limit; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// Bytes returns a copy of the bytes kept.
func (t *Tail) Bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]byte(nil), t.buf...)
}

// String returns the bytes kept as a string.
func (t *Tail) String() string { return string(t.Bytes()) }

// Total is the number of bytes written, kept or not.
func (t *Tail) Total() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.total
}
