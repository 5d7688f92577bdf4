package fromcluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/corepin/corepin/kube/kubeclient/kubeclienttest"
	"github.com/corepin/corepin/sim"
)

// nrtResource is NodeResourceTopology v1alpha2.
var nrtResource = schema.GroupVersionResource{Group: "topology.node.k8s.io", Version: "v1alpha2", Resource: "noderesourcetopologies"}

// endlessNRT lists pages of objects without end.
type endlessNRT struct {
	kubeclienttest.Reader
	limits []int64
}

func (r *endlessNRT) ListClusterObjects(_ context.Context, _ schema.GroupVersionResource, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	r.limits = append(r.limits, opts.Limit)
	out := &unstructured.UnstructuredList{}
	for i := range int(opts.Limit) {
		u := unstructured.Unstructured{Object: map[string]any{}}
		u.SetName(fmt.Sprintf("n-%d-%d", len(r.limits), i))
		out.Items = append(out.Items, u)
	}
	out.SetContinue("more")
	return out, nil
}

// TestReadBoundsNRT: a cluster listing NodeResourceTopology
// objects without end is refused after sim.MaxNodes, a page at a time.
func TestReadBoundsNRT(t *testing.T) {
	api := &endlessNRT{Reader: kubeclienttest.Reader{Interface: fake.NewClientset()}}
	_, err := Read(context.Background(), api, nrtResource)
	if err == nil || !strings.Contains(err.Error(), "more than 10000 NodeResourceTopology objects") || !errors.Is(err, ErrTooMany) {
		t.Fatalf("Read() error = %v, want the bound", err)
	}
	if want := sim.MaxNodes/PageSize + 1; len(api.limits) != want || api.limits[0] != PageSize {
		t.Errorf("%d lists of limit %v, want %d of %d", len(api.limits), api.limits[:1], want, PageSize)
	}
}
