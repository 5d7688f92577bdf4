package nodestate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	apiresource "k8s.io/apimachinery/pkg/api/resource"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/topology"
)

// Limits on what FreeCPUs reads of an object.
const (
	// MaxZones bounds the zones of one object, of every type (NFD's
	// topology-updater also publishes Core and Socket zones).
	MaxZones = 1024
	// MaxResources bounds the resources of one zone.
	MaxResources = 64
	// maxQuantityBytes bounds a quantity string: a whole CPU count needs
	// a handful of digits.
	maxQuantityBytes = 32
	// maxCPUsPerZone bounds a zone's available CPUs (cpuset's largest
	// CPU number is far below it).
	maxCPUsPerZone = 1 << 16
	// MaxAttributes bounds the attributes of one object read.
	MaxAttributes = 64
	// MaxOptions bounds the options of an Allocator (there are six).
	MaxOptions = 16
)

// ErrZones is wrapped by errors about an object's zones.
var ErrZones = errors.New("invalid NodeResourceTopology zones")

// FreeCPUs reads the free CPUs per NUMA node of an object's zones: the
// "available" cpu of each zone of type "Node", named "node-N" (ZoneName),
// at index N; NUMA nodes without a zone count 0. It is the inverse of
// Build's zones. Zones of other types are skipped. An object with no Node
// zone, more than MaxZones zones, more than MaxNUMAFreeNodes NUMA nodes, a
// Node zone named otherwise, given twice or without a cpu resource, or a
// cpu quantity that is not a whole, non-negative number of CPUs, is an
// error wrapping ErrZones.
func FreeCPUs(zones []Zone) ([]int, error) {
	if len(zones) > MaxZones {
		return nil, fmt.Errorf("%w: %d zones, more than %d", ErrZones, len(zones), MaxZones)
	}
	var free []int
	seen := map[int]bool{}
	for _, z := range zones {
		if z.Type != "Node" {
			continue
		}
		id, err := zoneID(z.Name)
		if err != nil {
			return nil, err
		}
		if seen[id] {
			return nil, fmt.Errorf("%w: zone %s given twice", ErrZones, ZoneName(topology.NodeID(id)))
		}
		seen[id] = true
		n, err := zoneCPUs(z)
		if err != nil {
			return nil, err
		}
		if id >= len(free) {
			free = slices.Grow(free, id+1-len(free))[:id+1]
		}
		free[id] = n
	}
	if len(seen) == 0 {
		return nil, fmt.Errorf("%w: no zone of type Node", ErrZones)
	}
	return free, nil
}

// zoneID is N of a zone named "node-N".
func zoneID(name string) (int, error) {
	digits, ok := strings.CutPrefix(name, "node-")
	if !ok || digits == "" || len(digits) > 4 || (len(digits) > 1 && digits[0] == '0') ||
		strings.IndexFunc(digits, func(r rune) bool { return r < '0' || r > '9' }) >= 0 {
		return 0, fmt.Errorf("%w: zone %q of type Node: want a name node-N, N a NUMA node number", ErrZones, short(name))
	}
	id, err := strconv.Atoi(digits)
	if err != nil || id < 0 {
		return 0, fmt.Errorf("%w: zone %q of type Node: want a name node-N, N a NUMA node number", ErrZones, short(name))
	}
	if id >= MaxNUMAFreeNodes {
		return 0, fmt.Errorf("%w: zone %s: NUMA node numbers must be below %d", ErrZones, name, MaxNUMAFreeNodes)
	}
	return id, nil
}

// zoneCPUs is the available cpu of zone z.
func zoneCPUs(z Zone) (int, error) {
	if len(z.Resources) > MaxResources {
		return 0, fmt.Errorf("%w: zone %s: %d resources, more than %d", ErrZones, z.Name, len(z.Resources), MaxResources)
	}
	i := slices.IndexFunc(z.Resources, func(r Resource) bool { return r.Name == "cpu" })
	if i < 0 {
		return 0, fmt.Errorf("%w: zone %s has no cpu resource", ErrZones, z.Name)
	}
	s := z.Resources[i].Available
	if len(s) > maxQuantityBytes {
		return 0, fmt.Errorf("%w: zone %s: cpu available %q longer than %d bytes", ErrZones, z.Name, short(s), maxQuantityBytes)
	}
	q, err := apiresource.ParseQuantity(s)
	if err != nil {
		return 0, fmt.Errorf("%w: zone %s: cpu available %q: %w", ErrZones, z.Name, s, err)
	}
	if q.Sign() < 0 || q.Cmp(*apiresource.NewQuantity(maxCPUsPerZone, apiresource.DecimalSI)) > 0 {
		return 0, fmt.Errorf("%w: zone %s: cpu available %s: want 0 to %d CPUs", ErrZones, z.Name, s, maxCPUsPerZone)
	}
	if q.Cmp(*apiresource.NewQuantity(q.Value(), apiresource.DecimalSI)) != 0 {
		return 0, fmt.Errorf("%w: zone %s: cpu available %s: want whole CPUs", ErrZones, z.Name, s)
	}
	return int(q.Value()), nil
}

func short(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// ErrAllocator is wrapped by errors about a node's allocator settings.
var ErrAllocator = errors.New("invalid allocator settings")

// ParseAllocator decodes AnnotationAllocator: one JSON object of the
// fields of Allocator and no others, at most MaxAnnotationBytes long, whose
// names Check accepts. Errors wrap ErrAllocator and say what is allowed.
func ParseAllocator(s string) (Allocator, error) {
	if len(s) > MaxAnnotationBytes {
		return Allocator{}, fmt.Errorf("%w: longer than %d bytes", ErrAllocator, MaxAnnotationBytes)
	}
	var a Allocator
	if t := bytes.TrimLeft([]byte(s), " \t\r\n"); len(t) > 0 && t[0] != '{' {
		return Allocator{}, fmt.Errorf("%w: %q is not a JSON object like {\"policy\":\"kubelet\",\"options\":[\"full-pcpus-only\"],\"topology_policy\":\"single-numa-node\"}",
			ErrAllocator, short(s))
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return Allocator{}, fmt.Errorf("%w: parsing %q: want a JSON object like {\"policy\":\"kubelet\",\"options\":[\"full-pcpus-only\"],\"topology_policy\":\"single-numa-node\"}: %w",
			ErrAllocator, short(s), err)
	}
	if dec.More() {
		return Allocator{}, fmt.Errorf("%w: trailing data after the JSON object", ErrAllocator)
	}
	if err := CheckAllocator(a); err != nil {
		return Allocator{}, err
	}
	return a, nil
}

// CheckAllocator reports whether a names a known engine, known options that the
// engine takes together (at most MaxOptions) and a known topology policy,
// with the allocator's own parsers. Errors wrap ErrAllocator (and
// alloc.ErrInvalid) and list the allowed names.
func CheckAllocator(a Allocator) error {
	if _, err := alloc.ParsePolicy(a.Policy); err != nil {
		return fmt.Errorf("%w: policy: %w", ErrAllocator, err)
	}
	if len(a.Options) > MaxOptions {
		return fmt.Errorf("%w: %d options, more than %d", ErrAllocator, len(a.Options), MaxOptions)
	}
	if err := alloc.CheckOptions(a.Options); err != nil {
		return fmt.Errorf("%w: options: %w", ErrAllocator, err)
	}
	if _, err := alloc.ParseTopologyPolicy(a.TopologyPolicy); err != nil {
		return fmt.Errorf("%w: topology_policy: %w", ErrAllocator, err)
	}
	return nil
}

// AllocatorFromAttributes reads the settings an object's attributes carry:
// AttrTopologyPolicy (as NFD's topology-updater and Build write it),
// AttrPolicy and AttrOptions; each absent one stays empty, other
// attributes are skipped. More than MaxAttributes attributes, one of
// these given twice, or a value Check refuses is an error wrapping
// ErrAllocator.
func AllocatorFromAttributes(attrs []Attribute) (Allocator, error) {
	if len(attrs) > MaxAttributes {
		return Allocator{}, fmt.Errorf("%w: %d attributes, more than %d", ErrAllocator, len(attrs), MaxAttributes)
	}
	var a Allocator
	seen := map[string]bool{}
	for _, at := range attrs {
		switch at.Name {
		case AttrTopologyPolicy, AttrPolicy, AttrOptions:
		default:
			continue
		}
		if seen[at.Name] {
			return Allocator{}, fmt.Errorf("%w: attribute %s given twice", ErrAllocator, at.Name)
		}
		seen[at.Name] = true
		if len(at.Value) > maxAttributeBytes {
			return Allocator{}, fmt.Errorf("%w: attribute %s %q: longer than %d bytes", ErrAllocator, at.Name, short(at.Value), maxAttributeBytes)
		}
		switch at.Name {
		case AttrTopologyPolicy:
			a.TopologyPolicy = at.Value
		case AttrPolicy:
			a.Policy = at.Value
		case AttrOptions:
			if at.Value != "" {
				a.Options = strings.Split(at.Value, ",")
			}
		}
	}
	if err := CheckAllocator(a); err != nil {
		return Allocator{}, fmt.Errorf("attributes %s, %s, %s: %w", AttrPolicy, AttrOptions, AttrTopologyPolicy, err)
	}
	return a, nil
}

// maxAttributeBytes bounds the value of an attribute AllocatorFromAttributes
// reads: every option name comma-joined is under 200 bytes.
const maxAttributeBytes = 1024
