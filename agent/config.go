package agent

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/nodecore"
	"github.com/corepin/corepin/schedext"
	"github.com/corepin/corepin/wakescan"
)

// MaxConfig bounds the size of a config file.
const MaxConfig = 1 << 20

// Config is the agent's YAML configuration (deploy/agent.yaml), with the
// kubelet CPU manager's options under the kubelet's names.
type Config struct {
	// Socket and State are --socket and --state; flags win.
	Socket string `yaml:"socket"`
	State  string `yaml:"state"`
	// Listen adds a TCP listener ("127.0.0.1:7411"); it needs TokenFile.
	Listen    string `yaml:"listen"`
	TokenFile string `yaml:"token_file"`
	// ReservedCPUs is kubelet's --reserved-cpus (Linux list format).
	ReservedCPUs string `yaml:"reserved_cpus"`
	// Policy is corepin (default) or kubelet.
	Policy string `yaml:"policy"`
	// PolicyOptions are kubelet static-policy option names
	// (cpuManagerPolicyOptions), e.g. full-pcpus-only.
	PolicyOptions []string `yaml:"policy_options"`
	// TopologyPolicy is the default topology policy of requests that give
	// none (kubelet's topologyManagerPolicy).
	TopologyPolicy string `yaml:"topology_policy"`
	// CgroupRoot names the agent's root group (default corepin-agent).
	CgroupRoot string `yaml:"cgroup_root"`
	// ReconcileInterval is how often the agent looks for workloads whose
	// processes exited (default 10s; 0 in the file means the default).
	ReconcileInterval time.Duration `yaml:"reconcile_interval"`
	// LogFormat is text (default) or json.
	LogFormat string `yaml:"log_format"`
	// QoS configures the QoS controller over BE workloads (off unless
	// qos.enabled).
	QoS QoSConfig `yaml:"qos"`
	// WakeScan is default (change nothing) or full: SIS_UTIL off in the
	// scheduler's features while BE workloads run, the value found
	// restored when they end or the agent stops (package wakescan).
	WakeScan string `yaml:"wake_scan"`
	// SchedExt is the BPF scheduler corepin runs and supervises (mode
	// off, the default, or layered: scx_layered on corepin's layer
	// config; package schedext).
	SchedExt schedext.Setting `yaml:"sched_ext"`
	// Reload, when set, reads the config again from where it came from:
	// at a clean stop the agent stops scx_layered if sched_ext was
	// removed from it meanwhile.
	Reload func() (Config, error) `yaml:"-"`
}

// DefaultCgroupRoot is the agent's root group name in each hierarchy.
const DefaultCgroupRoot = "corepin-agent"

// ParseConfig reads a YAML config: unknown keys and a second document are
// errors, and values are checked. Errors wrap ErrInvalid.
func ParseConfig(r io.Reader) (Config, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxConfig+1))
	if err != nil {
		return Config{}, fmt.Errorf("reading the config: %w", err)
	}
	if len(b) > MaxConfig {
		return Config{}, fmt.Errorf("%w: config larger than %d bytes", ErrInvalid, MaxConfig)
	}
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("%w: parsing the config: %v", ErrInvalid, err)
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("%w: parsing the config: more than one YAML document", ErrInvalid)
	}
	return c, c.Validate()
}

// Validate checks the values of c. Errors wrap ErrInvalid.
func (c Config) Validate() error {
	if _, err := c.Settings(); err != nil {
		return err
	}
	if c.Listen != "" && c.TokenFile == "" {
		return fmt.Errorf("%w: listen %s needs token_file: TCP is served only with a bearer token", ErrInvalid, c.Listen)
	}
	if c.ReconcileInterval < 0 || (c.ReconcileInterval != 0 && c.ReconcileInterval < 100*time.Millisecond) {
		return fmt.Errorf("%w: reconcile_interval %v: give 100ms or more", ErrInvalid, c.ReconcileInterval)
	}
	switch c.LogFormat {
	case "", "text", "json":
	default:
		return fmt.Errorf("%w: log_format %q: want text or json", ErrInvalid, c.LogFormat)
	}
	if c.CgroupRoot != "" {
		if err := nodecore.ValidateName(c.CgroupRoot); err != nil {
			return fmt.Errorf("cgroup_root: %w", err)
		}
	}
	if err := c.QoS.Validate(); err != nil {
		return err
	}
	if _, err := wakescan.ParseMode(c.WakeScan); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if _, err := c.SchedExt.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

// Settings are the node settings c describes (reserved_cpus, policy,
// policy_options, topology_policy: the keys the shared state uses too,
// read by nodecore.ParseSettings). Errors wrap ErrInvalid.
func (c Config) Settings() (alloc.NodeSettings, error) {
	return nodecore.ParseSettings(c.ReservedCPUs, c.Policy, c.PolicyOptions, c.TopologyPolicy)
}
