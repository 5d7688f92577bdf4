package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// BinDir is where the binary lives in the image, named as the image
// (Spec.Name); the chart's pods give only args (nri ..., extender ...,
// --config=...).
const BinDir = "/usr/local/bin/"

// Spec is what an image is made of. The same Spec with the same binaries
// gives the same digests.
type Spec struct {
	Name       string            // the binary and the image's title: corepin or corepin-scheduler
	Repository string            // e.g. ghcr.io/corepin/corepin
	Version    string            // the tag and the version label
	Revision   string            // the commit
	Source     string            // the source repository's URL
	Created    time.Time         // every time in the image (SOURCE_DATE_EPOCH)
	Binaries   map[string]string // os/arch -> path of the static binary
}

// Labels are the image's OCI labels (config labels and index annotations).
func (s Spec) Labels() map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":    s.Name,
		"org.opencontainers.image.source":   s.Source,
		"org.opencontainers.image.revision": s.Revision,
		"org.opencontainers.image.version":  s.Version,
		"org.opencontainers.image.created":  s.Created.Format(time.RFC3339),
	}
}

// Entrypoint is the image's binary.
func (s Spec) Entrypoint() string { return BinDir + s.Name }

// Result is a built image: the index and its images by os/arch.
type Result struct {
	Ref    name.Tag
	Index  v1.ImageIndex
	Images map[string]v1.Image
	spec   Spec
}

// Build makes one image per binary and the index of them, in memory.
func Build(s Spec) (*Result, error) {
	if s.Name == "" || strings.ContainsAny(s.Name, "/ ") {
		return nil, fmt.Errorf("image name %q: want the binary's name, e.g. corepin", s.Name)
	}
	ref, err := name.NewTag(s.Repository + ":" + s.Version)
	if err != nil {
		return nil, fmt.Errorf("naming the image %s:%s: %w", s.Repository, s.Version, err)
	}
	res := &Result{Ref: ref, Images: map[string]v1.Image{}, spec: s}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	plats := make([]string, 0, len(s.Binaries))
	for p := range s.Binaries {
		plats = append(plats, p)
	}
	slices.Sort(plats)
	for _, p := range plats {
		plat, err := platformOf(p)
		if err != nil {
			return nil, err
		}
		img, err := buildImage(s, plat, s.Binaries[p])
		if err != nil {
			return nil, fmt.Errorf("building the %s image: %w", p, err)
		}
		res.Images[p] = img
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: plainImage{img}, Descriptor: v1.Descriptor{Platform: plat}})
	}
	res.Index = mutate.Annotations(idx, s.Labels()).(v1.ImageIndex)
	return res, nil
}

// plainImage is an image whose descriptor carries no artifactType:
// go-containerregistry sets it to the config's media type on an image's
// descriptor in an index (OCI 1.1 allows it), and tools that predate the
// field (skopeo 1.9, Debian 12's) then rewrite the index, which they refuse
// to do when asked to keep digests.
type plainImage struct{ v1.Image }

func (i plainImage) Descriptor() (*v1.Descriptor, error) {
	d := v1.Descriptor{}
	var err error
	if d.Size, err = i.Size(); err != nil {
		return nil, err
	}
	if d.Digest, err = i.Digest(); err != nil {
		return nil, err
	}
	if d.MediaType, err = i.MediaType(); err != nil {
		return nil, err
	}
	return &d, nil
}

// platformOf parses os/arch; arm64 gets the variant v8 that registries and
// runtimes expect.
func platformOf(s string) (*v1.Platform, error) {
	osName, arch, ok := strings.Cut(s, "/")
	if !ok || osName != "linux" || (arch != "amd64" && arch != "arm64") {
		return nil, fmt.Errorf("platform %q: want linux/amd64 or linux/arm64", s)
	}
	p := &v1.Platform{OS: osName, Architecture: arch}
	if arch == "arm64" {
		p.Variant = "v8"
	}
	return p, nil
}

func buildImage(s Spec, plat *v1.Platform, bin string) (v1.Image, error) {
	b, err := os.ReadFile(bin)
	if err != nil {
		return nil, fmt.Errorf("reading the binary: %w", err)
	}
	tarb, err := layerTar(s.Entrypoint(), b, s.Created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(tarb)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	created := v1.Time{Time: s.Created}
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{
		Created: created, CreatedBy: "corepin tools/image: " + s.Entrypoint() + " (static)", Comment: s.Name + " " + s.Version,
	}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = plat.OS, plat.Architecture, plat.Variant
	cf.Created = created
	cf.Author = ""
	cf.Config = v1.Config{
		Entrypoint: []string{s.Entrypoint()},
		Env:        []string{"PATH=/usr/local/bin"},
		WorkingDir: "/",
		Labels:     s.Labels(),
	}
	return mutate.ConfigFile(img, cf)
}

// layerTar is the image's only layer: the binary (at entrypoint) and what
// a pod needs besides it. The pods run it with a read-only root and mount what they
// write (the state directory, the NRI socket); /tmp is an empty mount
// point for a volume. No shell, no libc: the binary is static.
func layerTar(entrypoint string, bin []byte, created time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	entries := []tar.Header{
		{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777},
		{Name: "usr/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "usr/local/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "usr/local/bin/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: strings.TrimPrefix(entrypoint, "/"), Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(bin))},
	}
	for _, h := range entries {
		h.ModTime = created
		h.Format = tar.FormatPAX
		if err := tw.WriteHeader(&h); err != nil {
			return nil, err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(bin); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Archive is the docker-archive file name of one platform's image.
func (r *Result) Archive(plat string) string {
	return fmt.Sprintf("%s-%s-%s.tar", r.spec.Name, r.spec.Version, strings.ReplaceAll(plat, "/", "-"))
}

// Write writes out/oci (an OCI layout whose index.json holds the index,
// named by its tag for skopeo and by its full name for ctr) and one
// docker-archive per platform. It replaces what an earlier run wrote there.
func (r *Result) Write(out string) error {
	dir := filepath.Join(out, "oci")
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("writing the OCI layout: %w", err)
	}
	if err := p.AppendIndex(r.Index, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": r.spec.Version,
		"io.containerd.image.name":          r.Ref.String(),
	})); err != nil {
		return fmt.Errorf("writing the OCI layout: %w", err)
	}
	for plat, img := range r.Images {
		f := filepath.Join(out, r.Archive(plat))
		if err := tarball.WriteToFile(f, r.Ref, img); err != nil {
			return fmt.Errorf("writing the %s docker-archive: %w", plat, err)
		}
	}
	return nil
}
