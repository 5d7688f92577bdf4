// Package nrt publishes a node's CPU topology and free CPUs per NUMA node
// as a NodeResourceTopology object (topology.node.k8s.io/v1alpha2, the CRD
// of kubernetes-sigs/noderesourcetopology-api that the topology-aware
// scheduler plugins read), over the API server's plain REST interface with
// the pod's service account. It does not install the CRD. For the
// scheduler extender it reads such objects back (FreeCPUs,
// AllocatorFromAttributes) and the CPU detail Koordinator's koordlet
// writes in their annotations (ParseKoord).
package publish

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

	"github.com/corepin/corepin/kube/nodestate"
)

const resource = "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies"

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
func (p *Publisher) Publish(ctx context.Context, o nodestate.NRTObject) error {
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
