package agent

import (
	"cmp"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/corepin/corepin/schedext"
	"github.com/corepin/corepin/topology"
)

// Timeouts of the API server against slow or stuck clients.
const (
	ReadHeaderTimeout = 5 * time.Second
	ReadTimeout       = 10 * time.Second
	WriteTimeout      = 30 * time.Second
	IdleTimeout       = 60 * time.Second
	MaxHeaderBytes    = 16 << 10
)

// Server is the HTTP/JSON front door of a Node. It holds no state of its
// own: every handler calls one Node method.
type Server struct {
	Node    *Node
	Metrics *Metrics
	// Token, when not empty, is required as "Authorization: Bearer TOKEN"
	// on every request (a TCP listener must have one).
	Token string
	Log   *slog.Logger
	// HeaderTimeout and BodyTimeout override ReadHeaderTimeout and
	// ReadTimeout when not zero (tests of slow clients).
	HeaderTimeout, BodyTimeout time.Duration
	// Scheduler, when set, reads the machine's scheduler section for
	// GET /v1/topology (ReadScheduler).
	Scheduler func() topology.Scheduler
	// SchedExt, when set, says what the sched_ext supervisor does, for
	// GET /v1/topology (nil: the setting is off).
	SchedExt func() *schedext.Status
}

// Handler returns the API's routes.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/workloads", s.create)
	mux.HandleFunc("GET /v1/workloads", s.list)
	mux.HandleFunc("GET /v1/workloads/{name}", s.get)
	mux.HandleFunc("DELETE /v1/workloads/{name}", s.delete)
	mux.HandleFunc("PATCH /v1/workloads/{name}", s.resize)
	mux.HandleFunc("GET /v1/usage", s.usage)
	mux.HandleFunc("GET /v1/topology", s.topology)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintln(w, "ok")
	})
	if s.Metrics != nil {
		// A second Handler of the same Node (a TCP listener beside the
		// socket) finds the collector registered already.
		s.Metrics.reg.Register(newWorkloadCollector(s.Node))
		mux.Handle("GET /metrics", promhttp.HandlerFor(s.Metrics.reg, promhttp.HandlerOpts{}))
	}
	h := checkPath(mux)
	if s.Token != "" {
		h = s.auth(h)
	}
	return s.recoverer(h)
}

// recoverer turns a panic in a handler into a 500 and a log line instead
// of a dropped connection (there should be none; the hostile tests say so).
func (s *Server) recoverer(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil && v != http.ErrAbortHandler {
				s.logger().Error("handler panic", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(v))
				writeError(w, http.StatusInternalServerError, fmt.Errorf("internal error"))
			}
		}()
		h.ServeHTTP(w, r)
	})
}

func (s *Server) auth(h http.Handler) http.Handler {
	want := []byte("Bearer " + s.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			writeError(w, http.StatusUnauthorized, errors.New("missing or wrong bearer token"))
			return
		}
		h.ServeHTTP(w, r)
	})
}

func (s *Server) logger() *slog.Logger {
	if s.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Log
}

// apiError is the body of every error response.
type apiError struct {
	Error string `json:"error"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

func writeError(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, apiError{Error: err.Error()})
}

// statusOf maps the Node's errors to HTTP status codes.
func statusOf(err error) int {
	switch {
	case errors.Is(err, ErrDiskFull):
		return http.StatusInsufficientStorage
	case errors.Is(err, ErrTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, ErrInvalid):
		return http.StatusUnprocessableEntity
	case errors.Is(err, ErrExists), errors.Is(err, ErrRejected), errors.Is(err, ErrTaken):
		return http.StatusConflict
	case errors.Is(err, ErrNotFound):
		return http.StatusNotFound
	}
	return http.StatusInternalServerError
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	spec, err := DecodeSpec(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		s.Metrics.Admitted(0, err)
		writeError(w, statusOf(err), err)
		return
	}
	wl, err := s.Node.Create(spec)
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	writeJSON(w, http.StatusCreated, wl)
}

func (s *Server) list(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"workloads": s.Node.List()})
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	wl, err := s.Node.Get(r.PathValue("name"))
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	writeJSON(w, http.StatusOK, wl)
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request) {
	if err := s.Node.Delete(r.PathValue("name")); err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) resize(w http.ResponseWriter, r *http.Request) {
	rs, err := DecodeResize(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		s.Metrics.Admitted(0, err)
		writeError(w, statusOf(err), err)
		return
	}
	wl, err := s.Node.Resize(r.PathValue("name"), *rs.CPUs)
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	writeJSON(w, http.StatusOK, wl)
}

func (s *Server) usage(w http.ResponseWriter, _ *http.Request) {
	body := map[string]any{"usage": s.Node.Usages()}
	if q := s.Node.QoSStatus(); q != nil {
		body["qos"] = q
	}
	writeJSON(w, http.StatusOK, body)
}

func (s *Server) topology(w http.ResponseWriter, _ *http.Request) {
	v := s.Node.View()
	if s.Scheduler != nil {
		sc := s.Scheduler()
		v.Scheduler = &sc
	}
	if s.SchedExt != nil {
		v.SchedExt = s.SchedExt()
	}
	writeJSON(w, http.StatusOK, v)
}

// Serve serves the API on ln until ctx is done, then shuts down
// gracefully: it stops accepting, lets requests in flight finish (up to
// WriteTimeout), and returns. Workloads keep running.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: cmp.Or(s.HeaderTimeout, ReadHeaderTimeout),
		ReadTimeout:       cmp.Or(s.BodyTimeout, ReadTimeout),
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.logger().Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), WriteTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutting down the API: %w", err)
	}
	return nil
}

// ListenUnix listens on the unix socket at path with mode 0600, replacing
// a stale socket file (one nobody answers on) but refusing a live one.
func ListenUnix(path string) (net.Listener, error) {
	if err := checkPlace("--socket", path); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("creating the socket directory: %w", err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("listening on %s: a file that is not a socket is in the way", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("listening on %s: another agent answers on it", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("removing the stale socket: %w", err)
		}
	}
	// The umask makes the socket 0600 from its creation: no window in
	// which another user could connect.
	old := syscallUmask(0o177)
	ln, err := net.Listen("unix", path)
	syscallUmask(old)
	if err != nil {
		return nil, fmt.Errorf("listening: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("listening: %w", err)
	}
	return ln, nil
}
