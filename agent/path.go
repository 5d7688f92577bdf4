package agent

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/corepin/corepin/nodecore"
)

// checkPath answers 400 to a request whose path is not the one it acts on
// (checkedPath), for every method and before h (the mux) sees it. Go's
// ServeMux redirects a path with "." or ".." segments or empty segments
// to its cleaned form: a client that follows the redirect of PATCH
// /v1/workloads/w1/../l1 would resize l1.
func checkPath(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := checkedPath(r.URL); err != nil {
			writeError(w, http.StatusBadRequest, err)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// checkedPath reports whether u's path names what it acts on as written:
// it starts with '/', no segment is empty (no "//", no trailing '/'
// except the root's) nor "." or "..", escaped or not, and a workload's
// segment below /v1/workloads/ is a valid workload name
// (nodecore.ValidateName). The query is not read.
func checkedPath(u *url.URL) error {
	p := u.EscapedPath()
	if p == "/" {
		return nil
	}
	if !strings.HasPrefix(p, "/") {
		return fmt.Errorf("path %q does not start with '/'", p)
	}
	segs := strings.Split(p[1:], "/")
	for i, seg := range segs {
		el, err := url.PathUnescape(seg)
		if err != nil {
			return fmt.Errorf("path %q: segment %d is not valid percent-encoding", p, i+1)
		}
		switch el {
		case "":
			return fmt.Errorf("path %q has an empty segment (\"//\" or a trailing '/'); corepin does not clean paths: write each segment once, as in /v1/workloads/NAME", p)
		case ".", "..":
			return fmt.Errorf("path %q has a %q segment; corepin does not clean paths: name the workload itself, as in /v1/workloads/NAME", p, el)
		}
		segs[i] = el
	}
	if len(segs) == 3 && segs[0] == "v1" && segs[1] == "workloads" {
		if err := nodecore.ValidateName(segs[2]); err != nil {
			why := strings.TrimPrefix(strings.TrimPrefix(err.Error(), nodecore.ErrInvalid.Error()+": "), "name: ")
			return fmt.Errorf("path %q: %q is not a workload name (letters, digits, '-', '_', '.'; not starting with '.' or '-'; at most %d bytes): %s",
				p, segs[2], nodecore.MaxNameLen, why)
		}
	}
	return nil
}
