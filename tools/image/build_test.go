package main

import (
	"archive/tar"
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"gopkg.in/yaml.v3"
)

// testSpec is a Spec over two stand-in binaries in a temporary directory.
func testSpec(t *testing.T) Spec {
	t.Helper()
	dir := t.TempDir()
	bins := map[string]string{}
	for _, p := range []string{"linux/amd64", "linux/arm64"} {
		f := filepath.Join(dir, filepath.Base(p))
		if err := os.WriteFile(f, []byte("static binary for "+p), 0o755); err != nil {
			t.Fatal(err)
		}
		bins[p] = f
	}
	return Spec{Name: "corepin", Repository: "ghcr.io/corepin/corepin", Version: "0.1.0", Revision: "a26a50b",
		Source: "https://github.com/corepin/corepin", Created: time.Unix(1795000000, 0).UTC(), Binaries: bins}
}

func mustBuild(t *testing.T, s Spec) *Result {
	t.Helper()
	res, err := Build(s)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func digest(t *testing.T, s Spec) v1.Hash {
	t.Helper()
	d, err := mustBuild(t, s).Index.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestSameInputsSameDigest(t *testing.T) {
	s := testSpec(t)
	first := digest(t, s)
	if again := digest(t, s); again != first {
		t.Fatalf("index digest %s, then %s from the same inputs", first, again)
	}
	// Each input reaches the digest: a later time (another commit, or
	// the build's own clock leaking in), another revision, another binary.
	later := s
	later.Created = s.Created.Add(time.Second)
	other := s
	other.Revision = "b000000"
	bin := s
	bin.Binaries = map[string]string{"linux/amd64": s.Binaries["linux/arm64"], "linux/arm64": s.Binaries["linux/arm64"]}
	for name, v := range map[string]Spec{"created": later, "revision": other, "binary": bin} {
		if d := digest(t, v); d == first {
			t.Errorf("another %s gives the same digest %s", name, d)
		}
	}
}

// TestBuildIsByteStable builds and writes the image builds times from the
// same inputs: every index manifest and every file written (the OCI
// layout, the docker-archives) must be the same bytes. make image-check
// compares two whole builds, which catches a timestamp but a map ranged
// unsorted only by chance; with two platforms, fifty builds give two
// orders with certainty but for 2^-49 (issue 27 §2.6).
func TestBuildIsByteStable(t *testing.T) {
	const builds = 50
	s := testSpec(t)
	var firstIndex []byte
	var firstFiles map[string]string
	for i := range builds {
		res := mustBuild(t, s)
		idx, err := res.Index.RawManifest()
		if err != nil {
			t.Fatal(err)
		}
		out := t.TempDir()
		if err := res.Write(out); err != nil {
			t.Fatal(err)
		}
		files := map[string]string{}
		err = filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(out, p)
			files[rel] = fmt.Sprintf("%x", sha256.Sum256(b))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			firstIndex, firstFiles = idx, files
			continue
		}
		if d := cmp.Diff(string(firstIndex), string(idx)); d != "" {
			t.Fatalf("build %d: the index manifest differs from the first build's (-first +now):\n%s", i, d)
		}
		if d := cmp.Diff(firstFiles, files); d != "" {
			t.Fatalf("build %d: the files written differ from the first build's (-first +now, sha256):\n%s", i, d)
		}
	}
}

func TestImageContents(t *testing.T) {
	s := testSpec(t)
	res, err := Build(s)
	if err != nil {
		t.Fatal(err)
	}
	im, err := res.Index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if im.MediaType != types.OCIImageIndex {
		t.Errorf("index media type %s, want %s", im.MediaType, types.OCIImageIndex)
	}
	if diff := cmp.Diff(s.Labels(), im.Annotations); diff != "" {
		t.Errorf("index annotations (-want +got):\n%s", diff)
	}
	var plats []v1.Platform
	for _, m := range im.Manifests {
		plats = append(plats, *m.Platform)
		if m.ArtifactType != "" || m.MediaType != types.OCIManifestSchema1 {
			t.Errorf("%s: media type %s, artifactType %q; want an OCI manifest and no artifactType (skopeo 1.9 rewrites such an index)", m.Platform, m.MediaType, m.ArtifactType)
		}
	}
	want := []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64", Variant: "v8"}}
	if diff := cmp.Diff(want, plats); diff != "" {
		t.Errorf("index platforms (-want +got):\n%s", diff)
	}
	for p, img := range res.Images {
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if got := cf.OS + "/" + cf.Architecture; got != p {
			t.Errorf("%s image's config says %s", p, got)
		}
		if !cf.Created.Time.Equal(s.Created) || len(cf.History) != 1 || !cf.History[0].Created.Time.Equal(s.Created) {
			t.Errorf("%s: created %v, history %+v; want every time %v", p, cf.Created, cf.History, s.Created)
		}
		if diff := cmp.Diff([]string{"/usr/local/bin/corepin"}, cf.Config.Entrypoint); diff != "" {
			t.Errorf("%s entrypoint (-want +got):\n%s", p, diff)
		}
		if diff := cmp.Diff(s.Labels(), cf.Config.Labels); diff != "" {
			t.Errorf("%s labels (-want +got):\n%s", p, diff)
		}
		layers, err := img.Layers()
		if err != nil || len(layers) != 1 {
			t.Fatalf("%s: %d layers (%v), want 1", p, len(layers), err)
		}
		got := listLayer(t, layers[0], s.Created)
		bin, _ := os.ReadFile(s.Binaries[p])
		wantFiles := map[string]string{"tmp/": "dir 1777", "usr/": "dir 755", "usr/local/": "dir 755",
			"usr/local/bin/": "dir 755", "usr/local/bin/corepin": "file 755 " + string(bin)}
		if diff := cmp.Diff(wantFiles, got); diff != "" {
			t.Errorf("%s layer (-want +got):\n%s", p, diff)
		}
	}
}

// listLayer lists a layer's entries as "dir MODE" or "file MODE CONTENT",
// failing on an entry not owned by root or not dated created.
func listLayer(t *testing.T, l v1.Layer, created time.Time) map[string]string {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	out := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(created) {
			t.Errorf("%s: uid %d gid %d mtime %v, want root's at %v", h.Name, h.Uid, h.Gid, h.ModTime, created)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			out[h.Name] = "dir " + formatMode(h.Mode)
		default:
			b, _ := io.ReadAll(tr)
			out[h.Name] = "file " + formatMode(h.Mode) + " " + string(b)
		}
	}
}

func formatMode(m int64) string { return strconv.FormatInt(m, 8) }

func TestWriteLayoutAndArchives(t *testing.T) {
	s := testSpec(t)
	res, err := Build(s)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	// An earlier run's layout is replaced, not added to.
	for range 2 {
		if err := res.Write(out); err != nil {
			t.Fatal(err)
		}
	}
	p, err := layout.FromPath(filepath.Join(out, "oci"))
	if err != nil {
		t.Fatal(err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	m, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	want, _ := res.Index.Digest()
	if len(m.Manifests) != 1 || m.Manifests[0].Digest != want {
		t.Fatalf("index.json lists %+v, want the one index %s", m.Manifests, want)
	}
	if got := m.Manifests[0].Annotations["org.opencontainers.image.ref.name"]; got != s.Version {
		t.Errorf("ref.name %q, want the tag %q (skopeo's oci:DIR:%s)", got, s.Version, s.Version)
	}
	for plat, img := range res.Images {
		f := filepath.Join(out, res.Archive(plat))
		got, err := tarball.ImageFromPath(f, &res.Ref)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		gd, _ := got.ConfigName()
		wd, _ := img.ConfigName()
		if gd != wd {
			t.Errorf("%s holds config %s, want the %s image's %s", f, gd, plat, wd)
		}
	}
}

func TestBadInput(t *testing.T) {
	for _, tc := range []struct{ name, bin string }{
		{name: "no path", bin: "linux/amd64="},
		{name: "no platform", bin: "dist/corepin"},
		{name: "other os", bin: "windows/amd64=x"},
		{name: "other arch", bin: "linux/riscv64=x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := (binFlags{}).Set(tc.bin); err == nil {
				t.Errorf("--bin %q accepted", tc.bin)
			}
		})
	}
	s := testSpec(t)
	s.Repository = "Not A/Repo"
	if _, err := Build(s); err == nil {
		t.Errorf("repository %q accepted", s.Repository)
	}
}

// TestSchedulerImage: corepin-scheduler's image is corepin's but for its
// binary's name (its entrypoint and only file), its title and its
// archives' names.
func TestSchedulerImage(t *testing.T) {
	s := testSpec(t)
	s.Name, s.Repository = "corepin-scheduler", "ghcr.io/corepin/corepin-scheduler"
	res, err := Build(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Labels()["org.opencontainers.image.title"]; got != "corepin-scheduler" {
		t.Errorf("title label %q, want corepin-scheduler", got)
	}
	if got := res.Archive("linux/arm64"); got != "corepin-scheduler-0.1.0-linux-arm64.tar" {
		t.Errorf("archive %q, want corepin-scheduler-0.1.0-linux-arm64.tar", got)
	}
	img := res.Images["linux/amd64"]
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"/usr/local/bin/corepin-scheduler"}, cf.Config.Entrypoint); diff != "" {
		t.Errorf("entrypoint (-want +got):\n%s", diff)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers (%v), want 1", len(layers), err)
	}
	files := listLayer(t, layers[0], s.Created)
	if _, ok := files["usr/local/bin/corepin-scheduler"]; !ok || len(files) != 5 {
		t.Errorf("layer %v, want corepin's directories and usr/local/bin/corepin-scheduler", files)
	}
	s.Name = ""
	if _, err := Build(s); err == nil {
		t.Errorf("an image without a name accepted")
	}
}

// TestChartDefaultImageIsMakeImage renders the chart's image lines with its
// default values (the scheduler in mode plugin): each names an image make
// image builds, the chart's image.repository or scheduler.repository
// tagged with its appVersion (the Makefile's VERSION), and the scheduler's
// line names corepin-scheduler's.
func TestChartDefaultImageIsMakeImage(t *testing.T) {
	const chart = "../../deploy/helm/corepin"
	var meta struct {
		AppVersion string `yaml:"appVersion"`
	}
	var values map[string]any
	for f, v := range map[string]any{"Chart.yaml": &meta, "values.yaml": &values} {
		b, err := os.ReadFile(filepath.Join(chart, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, v); err != nil {
			t.Fatal(err)
		}
	}
	built := map[string]string{} // image name -> reference
	for name, key := range images {
		repo, err := chartRepository(chart, key)
		if err != nil {
			t.Fatal(err)
		}
		s := testSpec(t)
		s.Name, s.Repository, s.Version = name, repo, meta.AppVersion
		res, err := Build(s)
		if err != nil {
			t.Fatal(err)
		}
		built[name] = res.Ref.String()
	}
	data := map[string]any{"Values": values, "Chart": map[string]any{"AppVersion": meta.AppVersion}}
	files, _ := filepath.Glob(filepath.Join(chart, "templates", "*.yaml"))
	seen := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.Contains(line, ".Values.image.") || !strings.Contains(line, "image:") {
				continue
			}
			tmpl, err := template.New(f).Parse(line)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			var out strings.Builder
			if err := tmpl.Execute(&out, data); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			_, img, _ := strings.Cut(out.String(), "image:")
			got := strings.Trim(strings.TrimSpace(img), `"`)
			want := built["corepin"]
			if strings.Contains(line, ".Values.scheduler.repository") {
				want = built["corepin-scheduler"]
			}
			if got != want {
				t.Errorf("%s: the chart's default image is %q, make image builds %q", filepath.Base(f), got, want)
			}
			seen[got] = true
		}
	}
	for name, ref := range built {
		if !seen[ref] {
			t.Errorf("no image line of %s/templates names %s, make image's %s", chart, ref, name)
		}
	}
}
