// Command image builds corepin's container images (corepin, and
// corepin-scheduler: --name) without a container daemon or a registry: one layer holding the static binary, per platform, and an
// OCI image index of them, every time fixed from SOURCE_DATE_EPOCH so that
// the same commit gives the same digest. It writes an OCI image layout and,
// per platform, a docker-archive tarball (the format has no index: one
// platform each), and pushes the layout's index to a registry.
//
// Usage (the Makefile's image and image-push targets):
//
//	go run ./image build --chart ../deploy/helm/corepin --version 0.1.0 \
//	  --revision $(git rev-parse HEAD) --epoch $(git log -1 --format=%ct) \
//	  --bin linux/amd64=../dist/corepin-0.1.0-linux-amd64 \
//	  --bin linux/arm64=../dist/corepin-0.1.0-linux-arm64 --out ../dist/image
//	go run ./image build --name corepin-scheduler --chart ../deploy/helm/corepin ... \
//	  --bin linux/amd64=../dist/corepin-scheduler-0.1.0-linux-amd64 ... --out ../dist/image/scheduler
//	go run ./image push --layout ../dist/image/oci ghcr.io/me/corepin:0.1.0
//
// It is a nested module (tools/) so that go-containerregistry never enters
// the product's go.mod.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"gopkg.in/yaml.v3"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "image: %v\n", err)
		os.Exit(2)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("want a command: build or push")
	}
	switch args[0] {
	case "build":
		return buildCmd(args[1:])
	case "push":
		return pushCmd(args[1:])
	}
	return fmt.Errorf("unknown command %q: want build or push", args[0])
}

// binFlags collects --bin os/arch=path.
type binFlags map[string]string

func (b binFlags) String() string { return fmt.Sprint(map[string]string(b)) }

func (b binFlags) Set(s string) error {
	plat, path, ok := strings.Cut(s, "=")
	if !ok || path == "" {
		return fmt.Errorf("--bin %q: want os/arch=path, e.g. linux/amd64=dist/corepin-linux-amd64", s)
	}
	if _, err := platformOf(plat); err != nil {
		return err
	}
	b[plat] = path
	return nil
}

// images are the images make image builds, by name (the binary's), each
// with the chart value naming its repository: the one place that names
// it, for the chart and for make image.
var images = map[string]string{
	"corepin":           "image.repository",
	"corepin-scheduler": "scheduler.repository",
}

func buildCmd(args []string) error {
	fs := flag.NewFlagSet("build", flag.ContinueOnError)
	bins := binFlags{}
	fs.Var(bins, "bin", "os/arch=path of a static binary (repeat per platform)")
	imageName := fs.String("name", "corepin", "the image: corepin or corepin-scheduler (its binary's name and the title label)")
	chart := fs.String("chart", "", "the Helm chart whose values.yaml names the image repository (image.repository, scheduler.repository)")
	version := fs.String("version", "", "the version: the image's tag and its version label")
	revision := fs.String("revision", "", "the commit (revision label)")
	source := fs.String("source", "https://github.com/corepin/corepin", "the source label")
	epoch := fs.String("epoch", os.Getenv("SOURCE_DATE_EPOCH"), "every time in the image, in seconds since 1970 (default $SOURCE_DATE_EPOCH)")
	out := fs.String("out", "", "output directory: oci/ (an OCI layout) and one docker-archive per platform")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if len(bins) == 0 || *chart == "" || *version == "" || *revision == "" || *out == "" {
		return errors.New("build needs --bin (one or more), --chart, --version, --revision and --out")
	}
	secs, err := strconv.ParseInt(*epoch, 10, 64)
	if err != nil {
		return fmt.Errorf("--epoch (or SOURCE_DATE_EPOCH) %q: want seconds since 1970, e.g. $(git log -1 --format=%%ct)", *epoch)
	}
	key, ok := images[*imageName]
	if !ok {
		return fmt.Errorf("--name %q: want corepin or corepin-scheduler", *imageName)
	}
	repo, err := chartRepository(*chart, key)
	if err != nil {
		return err
	}
	spec := Spec{Name: *imageName, Repository: repo, Version: *version, Revision: *revision, Source: *source,
		Created: time.Unix(secs, 0).UTC(), Binaries: bins}
	res, err := Build(spec)
	if err != nil {
		return err
	}
	if err := res.Write(*out); err != nil {
		return err
	}
	d, err := res.Index.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s@%s\n", res.Ref, d)
	return nil
}

// chartRepository reads the value key (dotted, e.g. image.repository)
// from the chart's values.yaml.
func chartRepository(chart, key string) (string, error) {
	p := filepath.Join(chart, "values.yaml")
	b, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("reading the chart's values: %w", err)
	}
	var v any
	if err := yaml.Unmarshal(b, &v); err != nil {
		return "", fmt.Errorf("parsing %s: %w", p, err)
	}
	for _, k := range strings.Split(key, ".") {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	repo, _ := v.(string)
	if repo == "" {
		return "", fmt.Errorf("%s names no %s", p, key)
	}
	return repo, nil
}

func pushCmd(args []string) error {
	fs := flag.NewFlagSet("push", flag.ContinueOnError)
	dir := fs.String("layout", "", "the OCI layout `make image` wrote (dist/image/oci)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" || fs.NArg() != 1 {
		return errors.New("push needs --layout DIR and one image reference, e.g. push --layout dist/image/oci registry.example.com/corepin:0.1.0")
	}
	ref, err := name.ParseReference(fs.Arg(0))
	if err != nil {
		return fmt.Errorf("parsing the image reference: %w", err)
	}
	p, err := layout.FromPath(*dir)
	if err != nil {
		return fmt.Errorf("opening the layout (run make image first): %w", err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		return err
	}
	m, err := top.IndexManifest()
	if err != nil {
		return err
	}
	if len(m.Manifests) != 1 {
		return fmt.Errorf("%s holds %d entries, want the one index make image writes", *dir, len(m.Manifests))
	}
	idx, err := top.ImageIndex(m.Manifests[0].Digest)
	if err != nil {
		return err
	}
	if err := remote.WriteIndex(ref, idx, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return fmt.Errorf("pushing %s: %w", ref, err)
	}
	fmt.Printf("%s@%s\n", ref, m.Manifests[0].Digest)
	return nil
}
