package nrt

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
)

// Annotations are a node's corepin annotations; a nil value removes the
// annotation (a JSON merge patch's null).
type Annotations map[string]*string

// AnnotateNode merge-patches node's annotations: a value sets one, nil
// removes it.
func (p *Publisher) AnnotateNode(ctx context.Context, node string, ann Annotations) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	if err != nil {
		return err
	}
	code, err := p.send(ctx, "annotating node "+node, http.MethodPatch, "/api/v1/nodes/"+url.PathEscape(node), "application/merge-patch+json", patch)
	if err == nil && code == http.StatusNotFound {
		return fmt.Errorf("annotating node %s: no such node (is --node-name right?)", node)
	}
	return err
}
