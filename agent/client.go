package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"
)

// DefaultSocket is where the agent listens and ctl dials by default.
const DefaultSocket = "/run/corepin/corepin.sock"

// Bounds of what a Client reads of an answer.
const (
	// MaxAnswer bounds a successful answer (a list of workloads).
	MaxAnswer = 64 << 20
	// MaxErrorBody bounds what is read of an error answer, and
	// MaxErrorLen the message an APIError carries.
	MaxErrorBody = 64 << 10
	MaxErrorLen  = 512
)

// Printable returns s fit for a terminal: every control character (C0
// but none, DEL, C1) and invalid UTF-8 byte is shown escaped ("\x1b",
// "\u009b"), and what exceeds max bytes is cut, saying how much was.
func Printable(s string, max int) string {
	var b strings.Builder
	for i, r := range s {
		if b.Len() >= max {
			fmt.Fprintf(&b, "... (%d more bytes)", len(s)-i)
			break
		}
		switch {
		case r == utf8.RuneError && strings.HasPrefix(s[i:], "\xef\xbf\xbd"):
			b.WriteRune(r)
		case r == utf8.RuneError:
			fmt.Fprintf(&b, "\\x%02x", s[i])
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			if r < 0x80 {
				fmt.Fprintf(&b, "\\x%02x", r)
			} else {
				fmt.Fprintf(&b, "\\u%04x", r)
			}
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Client talks to an agent's API.
type Client struct {
	base  string
	token string
	hc    *http.Client
}

// NewClient returns a client of the agent at addr: a unix socket path, or
// "http://host:port" (then token is sent as a bearer token).
func NewClient(addr, token string) *Client {
	c := &Client{token: token, hc: &http.Client{Timeout: 30 * time.Second}}
	if strings.HasPrefix(addr, "http://") || strings.HasPrefix(addr, "https://") {
		c.base = strings.TrimSuffix(addr, "/")
		return c
	}
	c.base = "http://corepin"
	c.hc.Transport = &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", addr)
	}}
	return c
}

// SetTimeout bounds each call (default 30s).
func (c *Client) SetTimeout(d time.Duration) { c.hc.Timeout = d }

// APIError is an error response of the agent.
type APIError struct {
	Status  int
	Message string
}

func (e *APIError) Error() string { return e.Message }

// Is lets errors.Is match an APIError with the agent's sentinels by status.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrInvalid:
		return e.Status == http.StatusUnprocessableEntity || e.Status == http.StatusRequestEntityTooLarge || e.Status == http.StatusBadRequest
	case ErrExists, ErrRejected, ErrTaken:
		return e.Status == http.StatusConflict
	case ErrNotFound:
		return e.Status == http.StatusNotFound
	}
	return false
}

func (c *Client) do(method, path string, body any, want int, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("calling the agent: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		// Whoever answers, an error is one printable line of bounded
		// length: no terminal escapes, no 10 MB lines.
		b, _ := io.ReadAll(io.LimitReader(resp.Body, MaxErrorBody))
		var ae apiError
		if json.Unmarshal(b, &ae) != nil || ae.Error == "" {
			ae.Error = strings.TrimSpace(string(b))
		}
		if ae.Error == "" {
			ae.Error = resp.Status
		}
		return &APIError{Status: resp.StatusCode, Message: Printable(ae.Error, MaxErrorLen)}
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswer+1))
	if err != nil {
		return fmt.Errorf("reading the agent's answer: %w", err)
	}
	if len(b) > MaxAnswer {
		return fmt.Errorf("reading the agent's answer: longer than %d bytes", MaxAnswer)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("decoding the agent's answer: %w", err)
	}
	return nil
}

// Create admits s.
func (c *Client) Create(s Spec) (Workload, error) {
	var w Workload
	err := c.do(http.MethodPost, "/v1/workloads", s, http.StatusCreated, &w)
	return w, err
}

// List returns every workload.
func (c *Client) List() ([]Workload, error) {
	var out struct {
		Workloads []Workload `json:"workloads"`
	}
	err := c.do(http.MethodGet, "/v1/workloads", nil, http.StatusOK, &out)
	return out.Workloads, err
}

// Get returns workload name.
func (c *Client) Get(name string) (Workload, error) {
	var w Workload
	err := c.do(http.MethodGet, "/v1/workloads/"+url.PathEscape(name), nil, http.StatusOK, &w)
	return w, err
}

// Resize changes workload name's size to cpus (PATCH /v1/workloads/NAME).
func (c *Client) Resize(name string, cpus float64) (Workload, error) {
	var w Workload
	err := c.do(http.MethodPatch, "/v1/workloads/"+url.PathEscape(name), ResizeSpec{CPUs: &cpus}, http.StatusOK, &w)
	return w, err
}

// Delete stops and releases workload name.
func (c *Client) Delete(name string) error {
	return c.do(http.MethodDelete, "/v1/workloads/"+url.PathEscape(name), nil, http.StatusNoContent, nil)
}

// usageDoc is the answer of GET /v1/usage.
type usageDoc struct {
	Usage []Usage    `json:"usage"`
	QoS   *QoSStatus `json:"qos"`
}

func (c *Client) usage() (usageDoc, error) {
	var out usageDoc
	err := c.do(http.MethodGet, "/v1/usage", nil, http.StatusOK, &out)
	return out, err
}

// Usage returns every workload's CPU accounting.
func (c *Client) Usage() ([]Usage, error) {
	d, err := c.usage()
	return d.Usage, err
}

// QoS returns the QoS controller's latest tick, or nil when the agent
// runs none.
func (c *Client) QoS() (*QoSStatus, error) {
	d, err := c.usage()
	return d.QoS, err
}

// Topology returns the map with assignments and pools.
func (c *Client) Topology() (TopologyView, error) {
	var v TopologyView
	err := c.do(http.MethodGet, "/v1/topology", nil, http.StatusOK, &v)
	return v, err
}

// Healthy reports whether the agent answers /healthz.
func (c *Client) Healthy() error {
	return c.do(http.MethodGet, "/healthz", nil, http.StatusOK, nil)
}

// IsUnreachable reports whether err means no agent answered at all.
func IsUnreachable(err error) bool {
	var ae *APIError
	return err != nil && !errors.As(err, &ae)
}

// TopRow is one workload's use over a `corepin ctl top` interval.
type TopRow struct {
	Name       string  `json:"name"`
	QoS        string  `json:"qos"`
	Cpuset     string  `json:"cpuset"`
	CPUs       float64 `json:"cpus_used"`
	ThrottledS float64 `json:"throttled_s"`
	Pids       int     `json:"pids"`
	// BERoute is Usage.BERoute.
	BERoute string `json:"be_route,omitempty"`
}

// Top samples every workload's accounting twice, interval apart, and
// returns each one's CPUs used and time throttled in between (workloads
// that came or went in between are left out) with the QoS controller's
// status (nil when it is off).
func (c *Client) Top(interval time.Duration) ([]TopRow, *QoSStatus, error) {
	a, err := c.usage()
	if err != nil {
		return nil, nil, err
	}
	time.Sleep(interval)
	b, err := c.usage()
	if err != nil {
		return nil, nil, err
	}
	before := make(map[string]Usage, len(a.Usage))
	for _, u := range a.Usage {
		before[u.Name] = u
	}
	var rows []TopRow
	for _, u := range b.Usage {
		if p, ok := before[u.Name]; ok {
			rows = append(rows, TopRow{Name: u.Name, QoS: u.QoS, Cpuset: u.Cpuset, Pids: u.Pids, BERoute: u.BERoute,
				CPUs: (u.UsageS - p.UsageS) / interval.Seconds(), ThrottledS: u.ThrottledS - p.ThrottledS})
		}
	}
	return rows, b.QoS, nil
}
