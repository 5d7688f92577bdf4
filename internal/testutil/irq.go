package testutil

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// FakeIRQs is a machine root (a t.TempDir) whose proc/irq holds one
// directory per interrupt of affinities (number -> its
// smp_affinity_list, "0-7"), as package irq reads them.
func FakeIRQs(t testing.TB, affinities map[int]string) string {
	t.Helper()
	root := t.TempDir()
	for n, aff := range affinities {
		d := filepath.Join(root, "proc", "irq", strconv.Itoa(n))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "smp_affinity_list"), []byte(aff+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// IRQAffinity is interrupt n's smp_affinity_list under root, trimmed.
func IRQAffinity(t testing.TB, root string, n int) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "proc", "irq", strconv.Itoa(n), "smp_affinity_list"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// SyncBuffer is a log sink tests read while other goroutines write it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
