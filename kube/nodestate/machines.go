package nodestate

import (
	"bytes"
	"crypto/sha256"
	"runtime"
	"sync"
	"weak"

	"github.com/corepin/corepin/topology"
)

// MaxSharedMachines caps how many decoded machines (AnnotationTopology
// documents) the decoders share: a fleet has a few machine types, and
// when more than this many different machines are in use, the ones known
// are forgotten all at once and the sharing starts over.
const MaxSharedMachines = 256

// machines are the machines the decoders have read and someone still
// holds, by the SHA-256 of the AnnotationTopology document: every node
// publishing the same document gets the same *topology.Topology, decoded
// once, and with it the index alloc keeps per topology. The cache holds
// them weakly, as alloc does its indexes: a machine no node state holds
// any more is collected and forgotten. A Topology is read-only once built
// (topology.New) and safe for concurrent use; nothing here or in plan or
// alloc writes one, and callers must not either (its Warnings included).
var machines = &machineCache{m: make(map[[sha256.Size]byte]weak.Pointer[topology.Topology])}

type machineCache struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]weak.Pointer[topology.Topology]
}

// read returns the machine the topology document doc describes, shared
// with every earlier caller that read the same document and still holds
// it. A malformed document is read (and refused) each time.
func (c *machineCache) read(doc string) (*topology.Topology, error) {
	k := sha256.Sum256([]byte(doc))
	if t := c.get(k); t != nil {
		return t, nil
	}
	t, err := topology.ReadDoc(bytes.NewReader([]byte(doc)))
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if kept := c.m[k].Value(); kept != nil { // another decoder read it meanwhile
		return kept, nil
	}
	if len(c.m) >= MaxSharedMachines {
		clear(c.m)
	}
	c.m[k] = weak.Make(t)
	runtime.AddCleanup(t, c.forget, k)
	return t, nil
}

// get is the machine kept under k, nil when none is.
func (c *machineCache) get(k [sha256.Size]byte) *topology.Topology {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[k].Value()
}

// forget drops the entry k once its machine is collected, unless a newer
// machine took its place.
func (c *machineCache) forget(k [sha256.Size]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w, ok := c.m[k]; ok && w.Value() == nil {
		delete(c.m, k)
	}
}

// len is how many machines c knows.
func (c *machineCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
