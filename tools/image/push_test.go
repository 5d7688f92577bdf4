package main

import (
	"io"
	"log"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// TestPushSendsTheLayoutsIndex pushes what make image wrote to a registry
// (go-containerregistry's in-memory one) and reads back the same index.
func TestPushSendsTheLayoutsIndex(t *testing.T) {
	res, err := Build(testSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if err := res.Write(out); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	ref := u.Host + "/me/corepin:0.1.0"
	if err := run([]string{"push", "--layout", filepath.Join(out, "oci"), ref}); err != nil {
		t.Fatal(err)
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	got, err := remote.Index(r)
	if err != nil {
		t.Fatalf("reading back %s: %v", ref, err)
	}
	gd, _ := got.Digest()
	wd, _ := res.Index.Digest()
	if gd != wd {
		t.Errorf("the registry holds %s as %s, make image built %s", ref, gd, wd)
	}
	for plat := range res.Images {
		if _, err := remote.Image(r, remote.WithPlatform(*mustPlatform(t, plat))); err != nil {
			t.Errorf("%s for %s: %v", ref, plat, err)
		}
	}
	if err := run([]string{"push", "--layout", filepath.Join(out, "oci")}); err == nil {
		t.Error("push without an image reference accepted")
	}
}

func mustPlatform(t *testing.T, s string) *v1.Platform {
	t.Helper()
	p, err := platformOf(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
