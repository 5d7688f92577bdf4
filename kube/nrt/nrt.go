// Package nrt publishes a node's CPU topology and free CPUs per NUMA node
// as a NodeResourceTopology object (topology.node.k8s.io/v1alpha2, the CRD
// of kubernetes-sigs/noderesourcetopology-api that the topology-aware
// scheduler plugins read), over the API server's plain REST interface with
// the pod's service account. It does not install the CRD. For the
// scheduler extender it reads such objects back (FreeCPUs,
// AllocatorFromAttributes) and the CPU detail Koordinator's koordlet
// writes in their annotations (ParseKoord).
package nrt

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/topology"
)

// Group and version of the object.
const (
	APIVersion = "topology.node.k8s.io/v1alpha2"
	Kind       = "NodeResourceTopology"
	resource   = "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies"
)

// Object is a NodeResourceTopology, with the fields corepin fills.
type Object struct {
	APIVersion string      `json:"apiVersion"`
	Kind       string      `json:"kind"`
	Metadata   Metadata    `json:"metadata"`
	Zones      []Zone      `json:"zones"`
	Attributes []Attribute `json:"attributes,omitempty"`
}

// Metadata names the object after its node.
type Metadata struct {
	Name string `json:"name"`
}

// Zone is one NUMA node.
type Zone struct {
	Name      string     `json:"name"`
	Type      string     `json:"type"`
	Costs     []Cost     `json:"costs,omitempty"`
	Resources []Resource `json:"resources,omitempty"`
}

// Cost is the NUMA distance to another zone.
type Cost struct {
	Name  string `json:"name"`
	Value int64  `json:"value"`
}

// Resource counts one resource of a zone (quantities as strings).
type Resource struct {
	Name        string `json:"name"`
	Capacity    string `json:"capacity"`
	Allocatable string `json:"allocatable"`
	Available   string `json:"available"`
}

// Attribute is a name/value pair.
type Attribute struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// ZoneName is the zone of NUMA node n, as the resource-topology-exporter
// names it.
func ZoneName(n topology.NodeID) string { return "node-" + strconv.Itoa(int(n)) }

// Attribute names of the object. The first two are those NFD's
// topology-updater publishes (and the topology-aware scheduler plugins
// read); the corepin ones carry what they do not define.
const (
	// AttrTopologyPolicy is the node's default topology policy: none,
	// best-effort, restricted or single-numa-node.
	AttrTopologyPolicy = "topologyManagerPolicy"
	// AttrTopologyScope is the Topology Manager's scope; corepin places
	// per container.
	AttrTopologyScope = "topologyManagerScope"
	// AttrPolicy is the node allocator's engine: corepin or kubelet.
	AttrPolicy = "corepin.io/policy"
	// AttrOptions are its kubelet static-policy options, comma-joined
	// (absent for none).
	AttrOptions = "corepin.io/options"
)

// Build is BuildWith for settings of topology policy topologyPolicy alone:
// no corepin attributes.
func Build(node string, t *topology.Topology, p alloc.Pools, topologyPolicy string) Object {
	return BuildWith(node, t, p, Allocator{TopologyPolicy: topologyPolicy})
}

// BuildWith is node's object for topology t under pools and the node
// allocator's settings s: per NUMA node with CPUs, capacity is its usable
// CPUs, allocatable those not reserved, and available those not held by an
// exclusive (LSE, LSR) workload either. s.TopologyPolicy ("" is none)
// becomes AttrTopologyPolicy; s.Policy, when set, AttrPolicy, and
// s.Options, when any, AttrOptions.
func BuildWith(node string, t *topology.Topology, p alloc.Pools, s Allocator) Object {
	o := Object{APIVersion: APIVersion, Kind: Kind, Metadata: Metadata{Name: node}}
	topologyPolicy := s.TopologyPolicy
	if topologyPolicy == "" {
		topologyPolicy = string(alloc.TopologyNone)
	}
	o.Attributes = []Attribute{{Name: AttrTopologyPolicy, Value: topologyPolicy}, {Name: AttrTopologyScope, Value: "container"}}
	if s.Policy != "" {
		o.Attributes = append(o.Attributes, Attribute{Name: AttrPolicy, Value: s.Policy})
	}
	if len(s.Options) > 0 {
		o.Attributes = append(o.Attributes, Attribute{Name: AttrOptions, Value: strings.Join(s.Options, ",")})
	}
	dist := t.Distances()
	nodes := t.NodesWithCPUs()
	for _, n := range nodes {
		cpus := t.NodeCPUs(n).Intersection(t.Allowed())
		alloca := cpus.Difference(p.Reserved)
		avail := alloca.Difference(p.LSE).Difference(p.LSR)
		z := Zone{Name: ZoneName(n), Type: "Node", Resources: []Resource{{Name: "cpu",
			Capacity: strconv.Itoa(cpus.Size()), Allocatable: strconv.Itoa(alloca.Size()), Available: strconv.Itoa(avail.Size())}}}
		if _, ok := dist[n]; ok {
			// A row is in the order of Nodes, not indexed by node id
			// (sparse ids: nodes 1 and 3, or node 1 alone, issue 17).
			for _, m := range nodes {
				z.Costs = append(z.Costs, Cost{Name: ZoneName(m), Value: int64(t.Distance(n, m))})
			}
		}
		o.Zones = append(o.Zones, z)
	}
	return o
}

// Publisher writes objects to an API server.
type Publisher struct {
	// Server is the API server's base URL; Token a bearer token.
	Server string
	Token  string
	Client *http.Client
}

// In-cluster service account files.
const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// ErrNotInCluster means the in-cluster configuration is missing.
var ErrNotInCluster = errors.New("not running in a Kubernetes pod (no KUBERNETES_SERVICE_HOST or service account)")

// InCluster is a Publisher with the pod's service account.
func InCluster() (*Publisher, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, ErrNotInCluster
	}
	token, err := os.ReadFile(saDir + "/token")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotInCluster, err)
	}
	ca, err := os.ReadFile(saDir + "/ca.crt")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotInCluster, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("reading %s/ca.crt: no certificate", saDir)
	}
	return &Publisher{Server: "https://" + net.JoinHostPort(host, port), Token: string(bytes.TrimSpace(token)),
		Client: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}}, nil
}

// Publish creates or updates o: a JSON merge patch of its zones and
// attributes, and a create when the object does not exist yet.
func (p *Publisher) Publish(ctx context.Context, o Object) error {
	patch, err := json.Marshal(map[string]any{"zones": o.Zones, "attributes": o.Attributes})
	if err != nil {
		return err
	}
	code, err := p.send(ctx, "publishing the NodeResourceTopology", http.MethodPatch, resource+"/"+url.PathEscape(o.Metadata.Name), "application/merge-patch+json", patch)
	if err != nil || code != http.StatusNotFound {
		return err
	}
	full, err := json.Marshal(o)
	if err != nil {
		return err
	}
	_, err = p.send(ctx, "publishing the NodeResourceTopology", http.MethodPost, resource, "application/json", full)
	return err
}

// send sends one request for what (the error's context); a status other
// than 2xx (and 404 to a PATCH, returned for the caller to decide) is an
// error carrying the start of the answer.
func (p *Publisher) send(ctx context.Context, what, method, path, ctype string, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, method, p.Server+path, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", ctype)
	req.Header.Set("Accept", "application/json")
	if p.Token != "" {
		req.Header.Set("Authorization", "Bearer "+p.Token)
	}
	c := p.Client
	if c == nil {
		c = http.DefaultClient
	}
	rsp, err := c.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	defer rsp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(rsp.Body, 512))
	switch {
	case rsp.StatusCode/100 == 2, method == http.MethodPatch && rsp.StatusCode == http.StatusNotFound:
		return rsp.StatusCode, nil
	}
	return rsp.StatusCode, fmt.Errorf("%s: %s %s: %s: %s", what, method, path, rsp.Status, bytes.TrimSpace(msg))
}
