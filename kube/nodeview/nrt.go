package nodeview

import (
	"cmp"
	"crypto/sha256"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/corepin/corepin/kube/nodestate"
)

// nrtObject is what the view reads of a node's NodeResourceTopology
// object.
type nrtObject struct {
	rv     string // its version: a new one is a new state
	fields nodestate.NRTFields
	err    error // its fields do not read (nodestate.FieldsOf)
	// seq is when the view learnt this version (View.seq): the pods
	// bound after it are not in it.
	seq uint64
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
func (vw *View) SetNRT(u *unstructured.Unstructured) {
	fields, err := nodestate.FieldsOf(u)
	// A resource version names one object's write: the node's name
	// keeps two objects apart.
	vw.SetNRTFields(u.GetName(), u.GetName()+"\x00"+u.GetResourceVersion(), fields, err)
}

// SetNRTFields is SetNRT for an object already read (nodestate.FieldsOf:
// its fields, or err, why they do not read) at version rv, which names
// what it publishes: objects of one version share one decoded state, and
// a version other than the one the view holds is a new state, which the
// pods bound before it are taken to be in.
func (vw *View) SetNRTFields(name, rv string, fields nodestate.NRTFields, err error) {
	vw.mu.Lock()
	o := &nrtObject{rv: rv, fields: fields, err: err}
	if old := vw.nrt[name]; old != nil && old.rv == rv {
		o.seq = old.seq
	} else {
		vw.seq++
		o.seq = vw.seq
	}
	vw.nrt[name] = o
	vw.mu.Unlock()
	vw.refreshNRT(name)
}

// DeleteNRT forgets node name's NodeResourceTopology object.
func (vw *View) DeleteNRT(name string) {
	vw.mu.Lock()
	delete(vw.nrt, name)
	vw.mu.Unlock()
	vw.refreshNRT(name)
}

// refreshNRT judges node name by its NodeResourceTopology object when the
// node is known and publishes no corepin annotations.
func (vw *View) refreshNRT(name string) {
	vw.mu.RLock()
	o := vw.nrt[name]
	labels, plain := vw.plain[name]
	old := vw.nodes[name]
	vw.mu.RUnlock()
	if !plain {
		return // unknown yet, or judged by its annotations
	}
	if o == nil {
		vw.mu.Lock()
		vw.forgetNodeLocked(name)
		if vw.byCalls {
			delete(vw.plain, name)
		}
		vw.mu.Unlock()
		return
	}
	fp := Fingerprint(sha256.Sum256(fmt.Appendf(nil, "nrt\x00%q\x00%q", o.rv, labels)))
	if old != nil && old.pub.fp == fp {
		return
	}
	vw.mu.RLock()
	p := vw.decoded[fp]
	vw.mu.RUnlock()
	if p == nil {
		p = decodeNRT(o, labels, fp)
	}
	vw.replace(name, old, p, o.seq)
}

// decodeNRT decodes a NodeResourceTopology object's fields under its
// node's Koordinator labels; an object that does not read (its fields,
// settings, zones or Koordinator annotations) fails the node.
func decodeNRT(o *nrtObject, labels [3]string, fp Fingerprint) *published {
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
