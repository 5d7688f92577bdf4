package schedext

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Cgroup names the layers are matched on: corepin's fixed parents. They
// are the names package nodecore (BERunRoot), enforce (DefaultRoot) and
// kube/nri (IdleGroup) give these groups; this package does not import
// them so that the layer config stays a leaf the agent, the NRI plugin
// and the CLI can all read.
const (
	// RunRoot is the root group of `corepin run` jobs other than BE.
	RunRoot = "corepin"
	// BERunRoot is the root group of `corepin run --qos BE` batches.
	BERunRoot = "corepin-be"
	// PodIdleParent is the NRI plugin's idle parent of BE pods under the
	// kubelet's kubepods group (cgroupfs driver).
	PodIdleParent = "kubepods/corepin-be"
)

// Layer weights: scx_layered clamps a layer's weight to 1..10000 and
// gives an unset one 100 (its MIN_LAYER_WEIGHT, MAX_LAYER_WEIGHT,
// DEFAULT_LAYER_WEIGHT).
const (
	WeightBE = 1
	WeightLS = 1000
)

// Layer is one layer of an scx_layered config, in the JSON form
// scx_layered reads (f:FILE): a name, OR-ed groups of AND-ed matches, and
// the layer's kind. Only what corepin uses is modelled.
type Layer struct {
	Name    string    `json:"name"`
	Comment string    `json:"comment,omitempty"`
	Matches [][]Match `json:"matches"`
	Kind    Kind      `json:"kind"`
}

// Match is one match condition; exactly one field is set, which makes
// its JSON the {"Kind": value} form scx_layered expects. Paths are the
// cgroup's path below the cgroup root without a leading "/" and with a
// trailing "/" (scx_layered's format_cgrp_path), so "corepin/" is the
// prefix of the corepin group and everything below it, and not of
// "corepin-be/".
type Match struct {
	CgroupPrefix   string `json:"CgroupPrefix,omitempty"`
	CgroupContains string `json:"CgroupContains,omitempty"`
}

// Kind is a layer's kind; corepin uses only Open layers (a layer whose
// tasks may run on any CPU their cpuset allows).
type Kind struct {
	Open *Open `json:"Open"`
}

// Open is an Open layer's settings: whether its tasks preempt other
// layers' tasks when no CPU is idle, and its weight (0: scx_layered's
// default).
type Open struct {
	Preempt bool `json:"preempt"`
	Weight  int  `json:"weight,omitempty"`
}

// Layer names of LayeredConfig.
const (
	LayerBE     = "be"
	LayerLS     = "ls"
	LayerNormal = "normal"
)

// LayeredConfig returns the layers corepin's classes map to (see the
// package documentation), in scx_layered's order: the first layer a task
// matches is its layer.
func LayeredConfig() []Layer {
	return []Layer{
		{
			Name:    LayerBE,
			Comment: "corepin BE: best-effort runs and pods under the idle parent; never preempts",
			Matches: [][]Match{{{CgroupPrefix: BERunRoot + "/"}}, {{CgroupContains: PodIdleParent + "/"}}},
			Kind:    Kind{Open: &Open{Preempt: false, Weight: WeightBE}},
		},
		{
			Name:    LayerLS,
			Comment: "corepin LSE, LSR and LS runs: preempts the other layers",
			Matches: [][]Match{{{CgroupPrefix: RunRoot + "/"}}},
			Kind:    Kind{Open: &Open{Preempt: true, Weight: WeightLS}},
		},
		{
			Name:    LayerNormal,
			Comment: "everything else",
			Matches: [][]Match{{}},
			Kind:    Kind{Open: &Open{}},
		},
	}
}

// MarshalLayered returns layers as the JSON document scx_layered reads
// (an array of layers), indented, with a trailing newline. It refuses
// what scx_layered would refuse at its start: no layer, a match with not
// exactly one condition set, an empty group of matches before the last
// layer, or a last layer that does not match everything.
func MarshalLayered(layers []Layer) ([]byte, error) {
	if err := validate(layers); err != nil {
		return nil, fmt.Errorf("marshalling scx_layered config: %w", err)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(layers); err != nil {
		return nil, fmt.Errorf("marshalling scx_layered config: %w", err)
	}
	return b.Bytes(), nil
}

func validate(layers []Layer) error {
	if len(layers) == 0 {
		return fmt.Errorf("no layer")
	}
	for i, l := range layers {
		last := i == len(layers)-1
		if l.Name == "" {
			return fmt.Errorf("layer %d has no name", i)
		}
		if l.Kind.Open == nil {
			return fmt.Errorf("layer %q has no kind", l.Name)
		}
		if last && (len(l.Matches) != 1 || len(l.Matches[0]) != 0) {
			return fmt.Errorf("last layer %q must match everything (matches [[]])", l.Name)
		}
		if !last && len(l.Matches) == 0 {
			return fmt.Errorf("layer %q before the last has no matches", l.Name)
		}
		for _, and := range l.Matches {
			if !last && len(and) == 0 {
				return fmt.Errorf("layer %q before the last has an empty group of matches", l.Name)
			}
			for _, m := range and {
				if (m.CgroupPrefix == "") == (m.CgroupContains == "") {
					return fmt.Errorf("layer %q has a match with %s", l.Name, map[bool]string{true: "no condition", false: "two conditions"}[m.CgroupPrefix == ""])
				}
			}
		}
	}
	return nil
}

// LayerOf returns the name of the layer scx_layered puts a task of the
// cgroup at path in ("/"-rooted as in /proc/PID/cgroup, or as
// scx_layered writes it): the first layer with a group of matches that
// all hold, as scx_layered's match_layer does; "" when none matches.
func LayerOf(layers []Layer, path string) string {
	p := strings.Trim(path, "/")
	if p != "" {
		p += "/"
	}
	for _, l := range layers {
		for _, and := range l.Matches {
			if all(and, p) {
				return l.Name
			}
		}
	}
	return ""
}

func all(and []Match, p string) bool {
	for _, m := range and {
		switch {
		case m.CgroupPrefix != "" && !strings.HasPrefix(p, m.CgroupPrefix):
			return false
		case m.CgroupContains != "" && !strings.Contains(p, m.CgroupContains):
			return false
		}
	}
	return true
}
