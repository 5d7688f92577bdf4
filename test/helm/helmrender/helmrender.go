// Package helmrender renders the chart as helm template does (Helm's own
// install action, client only), for this module's tests and for the
// render command that make e2e-deploy runs.
package helmrender

import (
	"context"
	"fmt"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/loader"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/strvals"
)

// Release is the release name the chart is rendered under.
const Release = "corepin"

// Values parses sets as helm --set does.
func Values(sets ...string) (map[string]any, error) {
	vals := map[string]any{}
	for _, s := range sets {
		if err := strvals.ParseInto(s, vals); err != nil {
			return nil, fmt.Errorf("--set %s: %w", s, err)
		}
	}
	return vals, nil
}

// Template is helm template of the chart in chartDir for a release in
// namespace ns on a cluster of kubeVersion, vals over values.yaml: the
// rendered manifest, or Helm's error (values.schema.json's included).
func Template(chartDir, ns, kubeVersion string, vals map[string]any) (string, error) {
	chrt, err := loader.Load(chartDir)
	if err != nil {
		return "", fmt.Errorf("loading the chart: %w", err)
	}
	kv, err := common.ParseKubeVersion(kubeVersion)
	if err != nil {
		return "", err
	}
	inst := action.NewInstall(action.NewConfiguration())
	inst.DryRunStrategy = action.DryRunClient
	inst.ReleaseName = Release
	inst.Namespace = ns
	inst.Replace = true
	inst.KubeVersion = kv
	rel, err := inst.RunWithContext(context.Background(), chrt, vals)
	if err != nil {
		return "", err
	}
	r, ok := rel.(*release.Release)
	if !ok {
		return "", fmt.Errorf("helm template returned a %T", rel)
	}
	return r.Manifest, nil
}
