package main

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/google/go-cmp/cmp"
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

// builds is how many times the reproducibility tests build: a map ranged
// unsorted gives two orders of two keys in about half the builds, so one
// identical pair proves little, fifty nearly everything (issue 27 §2.6).
const builds = 50

// TestEncodeIsByteStable generates corepin's SBOM once (the module graph
// and license scan are slow) and stamps and encodes a fresh copy of it
// builds times: every copy must give the same bytes. make image-check
// compares two whole builds, which catches a timestamp but a map ranged
// unsorted only by chance.
func TestEncodeIsByteStable(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: generating the SBOM reads every module of the graph")
	}
	bom, err := generate("../..", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(bom)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1795763977, 0).UTC()
	var first []byte
	for i := range builds {
		var c cdx.BOM
		if err := json.Unmarshal(raw, &c); err != nil {
			t.Fatal(err)
		}
		b, err := encode(&c, "0.1.0", "b21889a4", at)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = b
			continue
		}
		if !bytes.Equal(b, first) {
			t.Fatalf("build %d of the SBOM differs from the first (same BOM, version, commit, time):\n%s", i, cmp.Diff(string(first), string(b)))
		}
	}
}
