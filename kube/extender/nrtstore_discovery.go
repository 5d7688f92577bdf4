package extender

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// maxDiscoveryBytes bounds a discovery answer: a group version lists a
// handful of resources.
const maxDiscoveryBytes = 1 << 20

// HTTPDiscoverer is a Discoverer over a plain HTTP client of the API
// server (kubeclient.HTTP's), so the extender's binary links no typed
// clientset: it GETs /apis/GROUP/VERSION.
type HTTPDiscoverer struct {
	// Ctx bounds each request (nil: context.Background()).
	Ctx context.Context
	// Host is the API server's base URL, https://host:port.
	Host   string
	Client *http.Client
}

var _ Discoverer = HTTPDiscoverer{}

// ServerResourcesForGroupVersion implements Discoverer: a 404 is an error
// apierrors.IsNotFound matches, any other answer but 200 an error carrying
// its status and the start of its body.
func (d HTTPDiscoverer) ServerResourcesForGroupVersion(groupVersion string) (*metav1.APIResourceList, error) {
	ctx := d.Ctx
	if ctx == nil {
		ctx = context.Background()
	}
	url := strings.TrimSuffix(d.Host, "/") + "/apis/" + groupVersion
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	c := d.Client
	if c == nil {
		c = http.DefaultClient
	}
	rsp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer rsp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(rsp.Body, maxDiscoveryBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading GET %s: %w", url, err)
	}
	switch {
	case rsp.StatusCode == http.StatusNotFound:
		return nil, &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusNotFound,
			Reason: metav1.StatusReasonNotFound, Message: fmt.Sprintf("the server does not serve %s", groupVersion)}}
	case rsp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("GET %s: %s: %s", url, rsp.Status, short(strings.TrimSpace(string(body))))
	case len(body) > maxDiscoveryBytes:
		return nil, fmt.Errorf("GET %s: answer longer than %d bytes", url, maxDiscoveryBytes)
	}
	var list metav1.APIResourceList
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("parsing GET %s: %w", url, err)
	}
	return &list, nil
}
