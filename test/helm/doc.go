// Package helm checks the chart deploy/helm/corepin with Helm's own Go
// module (helm.sh/helm/v4, in this nested module so that Helm's Kubernetes
// libraries never enter the product's go.mod): helm lint --strict and helm
// template for every combination of the switches values.yaml and the
// README document, values.schema.json refusing bad values by name,
// kube/manifests (the product tests' renderer of the chart) and
// deploy/kubernetes/corepin-nri.yaml agreeing with Helm object for object,
// and,
// with the binaries make test-chart caches (COREPIN_KUBE_BIN), every
// rendered combination through a real kube-apiserver's server-side dry run
// with strict field validation, and the shipped ValidatingAdmissionPolicy
// holding each node's plugin to its own Node and NodeResourceTopology;
// there corepin nri's own publisher (kube/publish, with node A's
// pod-bound token from a file) creates and patches node A's object and
// annotates node A, read back through kube/nodestate's decoder, and is
// refused node B.
package helm
