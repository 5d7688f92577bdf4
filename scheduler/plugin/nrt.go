package plugin

import (
	"cmp"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/corepin/corepin/kube/nodestate"
)

// nrtObject is what the cache reads of a node's NodeResourceTopology
// object.
type nrtObject struct {
	rv     string // its resourceVersion: a new one is a new state
	fields nodestate.NRTFields
	err    error // its fields do not read (nodestate.FieldsOf)
}

// koordLabelsOf are n's Koordinator labels (bind policy, NUMA topology
// policy, NUMA allocate strategy), "" when absent.
func koordLabelsOf(n *corev1.Node) [3]string {
	return [3]string{n.Labels[nodestate.LabelKoordCPUBindPolicy], n.Labels[nodestate.LabelKoordNUMATopologyPolicy],
		n.Labels[nodestate.LabelKoordNUMAAllocateStrategy]}
}

// SetNRT records a node's NodeResourceTopology object u (its name is the
// node's): a node publishing no corepin annotations is judged by it, as
// the extender judges it (nodestate.NRTFields.Read, then
// nodestate.JudgeKoord for Koordinator's description or
// nodestate.JudgeFree for zones). An object that does not read fails
// its node, as a malformed annotation does: the node takes no pod that
// needs aligned CPUs (nodestate.Prejudge), with the error as the reason.
func (c *Cache) SetNRT(u *unstructured.Unstructured) {
	name := u.GetName()
	fields, err := nodestate.FieldsOf(u)
	c.mu.Lock()
	c.nrt[name] = &nrtObject{rv: u.GetResourceVersion(), fields: fields, err: err}
	c.mu.Unlock()
	c.refreshNRT(name)
}

// DeleteNRT forgets node name's NodeResourceTopology object.
func (c *Cache) DeleteNRT(name string) {
	c.mu.Lock()
	delete(c.nrt, name)
	c.mu.Unlock()
	c.refreshNRT(name)
}

// refreshNRT judges node name by its NodeResourceTopology object when the
// node is known and publishes no corepin annotations.
func (c *Cache) refreshNRT(name string) {
	c.mu.RLock()
	o := c.nrt[name]
	labels, plain := c.plain[name]
	old := c.nodes[name]
	c.mu.RUnlock()
	if !plain {
		return // unknown yet, or judged by its annotations
	}
	var p *published
	if o != nil {
		fp := fmt.Sprintf("nrt\x00%s\x00%q", o.rv, labels)
		if old != nil && old.pub.fp == fp {
			return
		}
		p = decodeNRT(o, labels, fp)
	}
	if p == nil {
		c.mu.Lock()
		c.forgetNodeLocked(name)
		c.mu.Unlock()
		return
	}
	c.replace(name, old, p)
}

// decodeNRT decodes a NodeResourceTopology object's fields under its
// node's Koordinator labels; an object that does not read (its fields,
// settings, zones or Koordinator annotations) fails the node.
func decodeNRT(o *nrtObject, labels [3]string, fp string) *published {
	p := &published{fp: fp, exclusiveOnly: true}
	var n nodestate.NRTNode
	readErr := o.err
	if readErr == nil {
		var koordErr error
		n, koordErr, readErr = o.fields.Read()
		readErr = cmp.Or(readErr, koordErr)
	}
	switch {
	case readErr != nil:
		p.err = nodestate.NRTError(readErr)
	case n.Koord != nil:
		var l nodestate.KoordLabels
		if l, p.err = nodestate.ParseKoordLabels(labels[0], labels[1], labels[2]); p.err != nil {
			p.err = fmt.Errorf("%w: %w", nodestate.ErrNode, p.err)
			break
		}
		p.j, p.err = nodestate.JudgeKoord(n.Koord, n.Settings.TopologyPolicy, l)
	default:
		p.j, p.err = nodestate.JudgeFree(n.Free, "NodeResourceTopology", n.Settings)
	}
	p.finish()
	return p
}
