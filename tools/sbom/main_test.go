package main

import (
	"testing"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
)

func TestStampIsTheCommitsOwn(t *testing.T) {
	gen := func() *cdx.BOM {
		// As cyclonedx-gomod writes it in a git clone: the main module's
		// version from git, in its purl and bom-ref.
		const ref = "pkg:golang/github.com/corepin/corepin@v0.0.0-20261127072414-4c6bf93a44ac?type=module"
		return &cdx.BOM{Metadata: &cdx.Metadata{Component: &cdx.Component{BOMRef: ref, Version: "v0.0.0-20261127072414-4c6bf93a44ac",
			Name: "github.com/corepin/corepin", PackageURL: "pkg:golang/github.com/corepin/corepin@v0.0.0-20261127072414-4c6bf93a44ac?goarch=amd64&goos=linux&type=module"}},
			Dependencies: &[]cdx.Dependency{{Ref: ref, Dependencies: &[]string{"pkg:golang/gopkg.in/yaml.v3@v3.0.1?type=module"}},
				{Ref: "pkg:golang/example.com/x@v1.0.0?type=module", Dependencies: &[]string{ref}}}}
	}
	at := time.Unix(1795763977, 0).UTC()
	a, b, other := gen(), gen(), gen()
	for _, tc := range []struct {
		bom      *cdx.BOM
		revision string
	}{{a, "b21889a4"}, {b, "b21889a4"}, {other, "c0ffee00"}} {
		if err := stamp(tc.bom, "v0.1.0", tc.revision, at); err != nil {
			t.Fatal(err)
		}
	}
	if a.SerialNumber != b.SerialNumber || a.SerialNumber == other.SerialNumber {
		t.Errorf("serial numbers %s, %s (same commit), %s (another): want equal, then different", a.SerialNumber, b.SerialNumber, other.SerialNumber)
	}
	c := a.Metadata.Component
	if want := "pkg:golang/github.com/corepin/corepin@v0.1.0?goarch=amd64&goos=linux&type=module"; c.Version != "v0.1.0" || c.PackageURL != want {
		t.Errorf("main component %s %s, want v0.1.0 %s", c.Version, c.PackageURL, want)
	}
	const want = "pkg:golang/github.com/corepin/corepin@v0.1.0?type=module"
	deps := *a.Dependencies
	if c.BOMRef != want || deps[0].Ref != want || (*deps[1].Dependencies)[0] != want {
		t.Errorf("main bom-ref %s, in the graph %s and %s; want %s in all three", c.BOMRef, deps[0].Ref, (*deps[1].Dependencies)[0], want)
	}
	if a.Metadata.Timestamp != "2026-11-27T07:19:37Z" {
		t.Errorf("timestamp %s, want the commit's 2026-11-27T07:19:37Z", a.Metadata.Timestamp)
	}
	if err := stamp(&cdx.BOM{}, "v0.1.0", "x", at); err == nil {
		t.Error("a BOM without a main component stamped")
	}
}
