package main

import (
	"testing"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
)

func TestStampIsTheCommitsOwn(t *testing.T) {
	gen := func() *cdx.BOM {
		return &cdx.BOM{Metadata: &cdx.Metadata{Component: &cdx.Component{
			Name: "github.com/corepin/corepin", PackageURL: "pkg:golang/github.com/corepin/corepin?goarch=amd64&goos=linux&type=module"}}}
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
	if a.Metadata.Timestamp != "2026-11-27T07:19:37Z" {
		t.Errorf("timestamp %s, want the commit's 2026-11-27T07:19:37Z", a.Metadata.Timestamp)
	}
	if err := stamp(&cdx.BOM{}, "v0.1.0", "x", at); err == nil {
		t.Error("a BOM without a main component stamped")
	}
}
