package kubetest

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// NRTCRD is the smallest CustomResourceDefinition of NodeResourceTopology
// the API server serves: one version (VERSION, which InstallNRTCRD
// replaces), cluster-scoped, any fields (the real one, from
// kubernetes-sigs/noderesourcetopology-api, is what NFD or Koordinator
// install; corepin ships none).
const NRTCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: noderesourcetopologies.topology.node.k8s.io
  annotations:
    # A *.k8s.io group needs it; the upstream CRD names its KEP.
    api-approved.kubernetes.io: https://github.com/kubernetes/enhancements/pull/1178
spec:
  group: topology.node.k8s.io
  scope: Cluster
  names:
    plural: noderesourcetopologies
    singular: noderesourcetopology
    kind: NodeResourceTopology
    listKind: NodeResourceTopologyList
    shortNames: [node-res-topo]
  versions:
    - name: VERSION
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
`

// CRDResource is the API resource of CustomResourceDefinitions.
var CRDResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// InstallNRTCRD creates NRTCRD with the CRD serving version alone and waits until it
// is established.
func InstallNRTCRD(ctx context.Context, t *testing.T, dyn dynamic.Interface, version string) {
	t.Helper()
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(strings.Replace(NRTCRD, "VERSION", version, 1)), &obj); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(CRDResource).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the NodeResourceTopology CRD: %v", err)
	}
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		u, err := dyn.Resource(CRDResource).Get(ctx, "noderesourcetopologies.topology.node.k8s.io", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if m, _ := c.(map[string]any); m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("the NodeResourceTopology CRD not established: %v", err)
	}
}
