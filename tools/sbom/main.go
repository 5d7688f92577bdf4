// Command sbom writes a CycloneDX SBOM of corepin's Go module graph (the
// modules the product's go.mod requires, without test-only ones) with
// cyclonedx-gomod's generator, reproducibly: the main module's version is
// the one make stamps (not read from git, which cyclonedx-gomod's own
// command does and which differs between a worktree and a clone), the
// timestamp is SOURCE_DATE_EPOCH and the serial number is derived from the
// version and commit.
//
// Usage (make dist):
//
//	go run ./sbom --module .. --version 0.1.0 --revision $(git rev-parse HEAD) \
//	  --epoch $(git log -1 --format=%ct) --out ../dist/corepin-0.1.0.cdx.json
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/CycloneDX/cyclonedx-gomod/pkg/generate/mod"
	"github.com/CycloneDX/cyclonedx-gomod/pkg/licensedetect/local"
	"github.com/google/uuid"
	"github.com/package-url/packageurl-go"
	"github.com/rs/zerolog"
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "sbom: %v\n", err)
		os.Exit(2)
	}
}

func run(args []string, logw io.Writer) error {
	fs := flag.NewFlagSet("sbom", flag.ContinueOnError)
	dir := fs.String("module", "", "the module's directory")
	version := fs.String("version", "", "the main module's version (the Makefile's VERSION)")
	revision := fs.String("revision", "", "the commit")
	epoch := fs.String("epoch", os.Getenv("SOURCE_DATE_EPOCH"), "the BOM's timestamp, in seconds since 1970 (default $SOURCE_DATE_EPOCH)")
	out := fs.String("out", "", "the output file (CycloneDX 1.6 JSON)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" || *version == "" || *revision == "" || *out == "" {
		return errors.New("sbom needs --module, --version, --revision and --out")
	}
	secs, err := strconv.ParseInt(*epoch, 10, 64)
	if err != nil {
		return fmt.Errorf("--epoch (or SOURCE_DATE_EPOCH) %q: want seconds since 1970, e.g. $(git log -1 --format=%%ct)", *epoch)
	}
	b, err := build(*dir, *version, *revision, time.Unix(secs, 0).UTC(), logw)
	if err != nil {
		return err
	}
	return os.WriteFile(*out, b, 0o666) // as os.Create made it
}

// build is the stamped SBOM of the module in dir (generate, then encode).
func build(dir, version, revision string, created time.Time, logw io.Writer) ([]byte, error) {
	bom, err := generate(dir, logw)
	if err != nil {
		return nil, err
	}
	return encode(bom, version, revision, created)
}

// generate is cyclonedx-gomod's BOM of the module in dir, warnings to logw.
func generate(dir string, logw io.Writer) (*cdx.BOM, error) {
	logger := zerolog.New(zerolog.ConsoleWriter{Out: logw, NoColor: true, PartsExclude: []string{zerolog.TimestampFieldName}}).Level(zerolog.WarnLevel)
	// cyclonedx-gomod reads the main module's version from git and warns
	// when it cannot (a worktree); it is replaced below either way.
	logger = logger.Hook(zerolog.HookFunc(func(e *zerolog.Event, l zerolog.Level, msg string) {
		if msg == "failed to determine version of main module" {
			e.Discard()
		}
	}))
	g, err := mod.NewGenerator(dir, mod.WithLogger(logger), mod.WithLicenseDetector(local.NewDetector(logger)),
		mod.WithComponentType(cdx.ComponentTypeApplication))
	if err != nil {
		return nil, err
	}
	bom, err := g.Generate()
	if err != nil {
		return nil, fmt.Errorf("generating the SBOM: %w", err)
	}
	return bom, nil
}

// encode stamps bom (see stamp; version without its "v") and writes it as
// CycloneDX 1.6 JSON. The same BOM, version, revision and time give the
// same bytes.
func encode(bom *cdx.BOM, version, revision string, created time.Time) ([]byte, error) {
	if err := stamp(bom, "v"+version, revision, created); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := cdx.NewBOMEncoder(&buf, cdx.BOMFileFormatJSON).SetPretty(true).EncodeVersion(bom, cdx.SpecVersion1_6); err != nil {
		return nil, fmt.Errorf("writing the SBOM: %w", err)
	}
	return buf.Bytes(), nil
}

// withVersion is purl with its version set; "" stays "".
func withVersion(purl, version string) (string, error) {
	if purl == "" {
		return "", nil
	}
	p, err := packageurl.FromString(purl)
	if err != nil {
		return "", fmt.Errorf("parsing the main component's purl %q: %w", purl, err)
	}
	p.Version = version
	return p.ToString(), nil
}

const gomodPath = "github.com/CycloneDX/cyclonedx-gomod"

// depVersion is the version of a module this program is built with.
func depVersion(path string) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == path {
				return d.Version
			}
		}
	}
	return "unknown"
}

// stamp gives the BOM's main component its version (and a purl naming
// it), the timestamp and a serial number that is the same for the same
// version and commit.
func stamp(bom *cdx.BOM, version, revision string, created time.Time) error {
	if bom.Metadata == nil || bom.Metadata.Component == nil {
		return errors.New("the generated SBOM names no main component")
	}
	c := bom.Metadata.Component
	c.Version = version
	var err error
	if c.PackageURL, err = withVersion(c.PackageURL, version); err != nil {
		return err
	}
	// The main module's bom-ref is a purl with the version git gave, or
	// none: the dependency graph names it by that ref.
	old := c.BOMRef
	if c.BOMRef, err = withVersion(c.BOMRef, version); err != nil {
		return err
	}
	if bom.Dependencies != nil {
		for i := range *bom.Dependencies {
			d := &(*bom.Dependencies)[i]
			if d.Ref == old {
				d.Ref = c.BOMRef
			}
			if d.Dependencies != nil {
				for j, r := range *d.Dependencies {
					if r == old {
						(*d.Dependencies)[j] = c.BOMRef
					}
				}
			}
		}
	}
	c.Properties = &[]cdx.Property{{Name: "corepin:revision", Value: revision}}
	bom.Metadata.Timestamp = created.Format(time.RFC3339)
	bom.Metadata.Tools = &cdx.ToolsChoice{Components: &[]cdx.Component{{
		Type: cdx.ComponentTypeApplication, Group: "CycloneDX", Name: "cyclonedx-gomod", Version: depVersion(gomodPath),
	}}}
	bom.SerialNumber = uuid.NewSHA1(uuid.NameSpaceURL, []byte("https://github.com/corepin/corepin@"+version+"+"+revision)).URN()
	return nil
}
