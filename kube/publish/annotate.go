package publish

import (
	"context"
	"log/slog"
	"strconv"
	"sync"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/kube/nodestate"
)

// Annotator keeps a node's annotations up to date with its state, for
// Options.Annotate of kube/nri.
type Annotator struct {
	Publisher *Publisher
	Node      string
	// TopologyPolicy is the node's default topology policy (the NRI
	// plugin's), published in nodestate.AnnotationAllocator.
	TopologyPolicy alloc.TopologyPolicy
	Log            *slog.Logger
	coarse         sync.Once
}

// Annotate publishes st, the pod UID of each container assignment (pods,
// by assignment id; nil when unknown) and a.TopologyPolicy
// (nodestate.NodeAnnotations) on the node, by a merge patch of its
// annotations alone (Publisher.AnnotateNode). The first time the topology
// is too large and only nodestate.AnnotationNUMAFree is published, it logs
// so once.
func (a *Annotator) Annotate(ctx context.Context, st *alloc.State, pods map[string]string) error {
	ann, coarse, err := nodestate.NodeAnnotations(st, a.TopologyPolicy, pods)
	if err != nil {
		return err
	}
	if coarse && a.Log != nil {
		a.coarse.Do(func() {
			a.Log.Warn("the node's topology is too large for its annotations; publishing free CPUs per NUMA node only",
				"annotation", nodestate.AnnotationNUMAFree, "max_bytes", strconv.Itoa(nodestate.MaxAnnotationBytes))
		})
	}
	return a.Publisher.AnnotateNode(ctx, a.Node, ann)
}
