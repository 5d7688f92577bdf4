package nodestate

import (
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// NRTResource is the NodeResourceTopology resource of version v1alpha2
// (the CRD of kubernetes-sigs/noderesourcetopology-api; corepin nri
// --publish-nrt and NFD's topology-updater publish it).
var NRTResource = schema.GroupVersionResource{Group: "topology.node.k8s.io", Version: "v1alpha2", Resource: "noderesourcetopologies"}

// NRTResourceV1alpha1 is the same resource at version v1alpha1, the one
// Koordinator's koordlet writes (its CRD may serve no other).
var NRTResourceV1alpha1 = schema.GroupVersionResource{Group: "topology.node.k8s.io", Version: "v1alpha1", Resource: "noderesourcetopologies"}

// Discoverer answers which resources an API group version serves: the
// one method of client-go's discovery.DiscoveryInterface NRTResourceOf needs
// (kube/extender's HTTPDiscoverer implements it without linking client-go's typed
// clientsets; client-go's discovery clients and fakes implement it too).
type Discoverer interface {
	ServerResourcesForGroupVersion(groupVersion string) (*metav1.APIResourceList, error)
}

// ErrNoNRT means the API server serves no NodeResourceTopology version corepin
// reads.
var ErrNoNRT = errors.New("the NodeResourceTopology CRD is not installed (topology.node.k8s.io serves neither v1alpha2 nor v1alpha1)")

// NRTResourceOf asks d which NodeResourceTopology version the API server
// serves: NRTResource (v1alpha2) when it does, else NRTResourceV1alpha1
// (Koordinator's), else an error wrapping ErrNoNRT. A version whose group
// is not found, or that lists no noderesourcetopologies, is not served;
// any other failure is returned as is.
func NRTResourceOf(d Discoverer) (schema.GroupVersionResource, error) {
	for _, res := range []schema.GroupVersionResource{NRTResource, NRTResourceV1alpha1} {
		list, err := d.ServerResourcesForGroupVersion(res.GroupVersion().String())
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return schema.GroupVersionResource{}, fmt.Errorf("discovering %s: %w", res.GroupVersion(), err)
		}
		for _, r := range list.APIResources {
			if r.Name == res.Resource {
				return res, nil
			}
		}
	}
	return schema.GroupVersionResource{}, ErrNoNRT
}
