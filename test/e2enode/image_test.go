package e2enode

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestImageUnderContainerd runs the image make image built under the
// private containerd, in both of the formats it writes: the docker-archive
// of this machine's platform imported as it is, and the OCI layout copied by
// skopeo (the whole index, digests kept) into an OCI archive and imported.
// In each, corepin version prints the commit make stamped, and the image's
// entrypoint is corepin.
func TestImageUnderContainerd(t *testing.T) {
	bin, dir := os.Getenv("COREPIN_E2E_BIN"), os.Getenv("COREPIN_IMAGE_DIR")
	version, commit := os.Getenv("COREPIN_IMAGE_VERSION"), os.Getenv("COREPIN_IMAGE_COMMIT")
	if os.Geteuid() != 0 || bin == "" || dir == "" || version == "" || commit == "" {
		missing(t, "needs root, COREPIN_E2E_BIN and COREPIN_IMAGE_{DIR,VERSION,COMMIT}; run make e2e-node (it runs make image)")
	}
	if _, err := exec.LookPath("skopeo"); err != nil {
		missing(t, "skopeo missing (apt-get install skopeo)")
	}
	// The layout's index.json names the index, by its digest and by the
	// full name make image gave it.
	var layout struct {
		Manifests []struct {
			Digest      string            `json:"digest"`
			Annotations map[string]string `json:"annotations"`
		} `json:"manifests"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "oci", "index.json"))
	if err != nil {
		t.Fatalf("reading the OCI layout (run make image): %v", err)
	}
	if err := json.Unmarshal(b, &layout); err != nil || len(layout.Manifests) != 1 {
		t.Fatalf("the OCI layout's index.json: %v, %d entries; want one", err, len(layout.Manifests))
	}
	name, index := layout.Manifests[0].Annotations["io.containerd.image.name"], layout.Manifests[0].Digest
	if !strings.HasSuffix(name, ":"+version) {
		t.Fatalf("make image named the image %q, want the tag %s", name, version)
	}

	n := newNode(t, containerd{bin: bin}, bin, "")
	ctrArgs := func(args ...string) []string {
		return append([]string{"--address", n.sock(), "-n", "corepin-image"}, args...)
	}
	ctr := func(args ...string) string { return n.run(filepath.Join(bin, "ctr"), ctrArgs(args...)...) }
	// run runs a container of ref and returns its standard output (ctr
	// writes its own warnings, cgroup v1's deprecation, to standard error).
	runs := 0
	run := func(t *testing.T, ref string, args ...string) string {
		t.Helper()
		runs++
		id := fmt.Sprintf("corepin-image-%d", runs)
		args = append([]string{"run", "--rm", "--runc-binary", "/usr/sbin/runc", "--cgroup", cgroupParent + "/" + id, ref, id}, args...)
		cmd := exec.Command(filepath.Join(bin, "ctr"), ctrArgs(args...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("ctr %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
		}
		return string(out)
	}
	// version1 runs corepin version -o json in a container of ref.
	version1 := func(t *testing.T, ref string) map[string]string {
		t.Helper()
		out := run(t, ref, "/usr/local/bin/corepin", "version", "-o", "json")
		var v map[string]string
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("corepin version -o json in %s printed %q: %v", ref, out, err)
		}
		return v
	}

	t.Run("docker-archive", func(t *testing.T) {
		n.t = t
		archive := filepath.Join(dir, fmt.Sprintf("corepin-%s-linux-%s.tar", version, runtime.GOARCH))
		ctr("images", "import", archive)
		v := version1(t, name)
		if v["commit"] != commit || v["version"] != version {
			t.Errorf("in the image of %s, corepin version says %v; want version %s, commit %s", archive, v, version, commit)
		}
		// No arguments: the image's own entrypoint, corepin, prints its help.
		out := run(t, name)
		if !strings.Contains(out, "corepin reads the CPU topology") {
			t.Errorf("the image run without arguments printed %q, want corepin's help (its entrypoint)", out)
		}
	})
	t.Run("OCI layout through skopeo", func(t *testing.T) {
		n.t = t
		oci := filepath.Join(t.TempDir(), "corepin-oci.tar")
		ref := "localhost/corepin/corepin-oci:" + version
		n.run("skopeo", "copy", "--all", "--preserve-digests", "oci:"+filepath.Join(dir, "oci")+":"+version, "oci-archive:"+oci+":"+ref)
		ctr("images", "import", "--all-platforms", oci)
		// The imported image is the index make image built, digest and all.
		ls := ctr("images", "ls")
		found := false
		for _, line := range strings.Split(ls, "\n") {
			if f := strings.Fields(line); len(f) > 2 && f[0] == ref {
				found = true
				if f[2] != index {
					t.Errorf("%s imported as %s, make image built the index %s", ref, f[2], index)
				}
			}
		}
		if !found {
			t.Fatalf("ctr images ls lists no %s:\n%s", ref, ls)
		}
		v := version1(t, ref)
		if v["commit"] != commit || v["version"] != version {
			t.Errorf("in the image of the OCI layout, corepin version says %v; want version %s, commit %s", v, version, commit)
		}
	})
	n.t = t
}
