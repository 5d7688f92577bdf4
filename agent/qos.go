package agent

import (
	"context"
	"fmt"
	"time"

	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/nodecore"
	"github.com/corepin/corepin/qos"
)

// QoSConfig is the `qos:` section of the agent's config: the controller
// of package qos, run by the agent over its BE workloads.
//
//	qos:
//	  enabled: true
//	  mechanism: cpuset      # or quota
//	  threshold: 0.65        # Koordinator's suppression threshold
//	  slice: 1ms             # EEVDF slice for LS threads (Linux 6.12+)
//	  be_slice: 100us        # and for BE threads: a pick of BE ends sooner
//	  burst: true            # CFS burst for throttled LS workloads
type QoSConfig struct {
	Enabled bool `yaml:"enabled"`
	// Tick is the loop's period (default qos.DefaultTick, 20ms..10s).
	Tick time.Duration `yaml:"tick"`
	// Slice is requested for every LS thread where the kernel takes it.
	Slice time.Duration `yaml:"slice"`
	// BESlice is requested for every BE thread (qos.Loop.BESlice).
	BESlice time.Duration `yaml:"be_slice"`
	// Burst grants CFS burst to throttled LS workloads.
	Burst bool `yaml:"burst"`
	// SystemPSI uses /proc/pressure/cpu where groups have no pressure
	// file (cgroup v1); see qos.Loop.SystemPSI.
	SystemPSI  bool `yaml:"system_psi"`
	qos.Config `yaml:",inline"`
}

// Validate checks c; errors wrap ErrInvalid and name the key.
func (c QoSConfig) Validate() error {
	if c.Tick != 0 && (c.Tick < 20*time.Millisecond || c.Tick > 10*time.Second) {
		return fmt.Errorf("%w: qos.tick %v: give 20ms to 10s", ErrInvalid, c.Tick)
	}
	if err := (enforce.ThreadSched{Slice: c.Slice}).Validate(); err != nil {
		return fmt.Errorf("%w: qos.slice %v: give %v to %v", ErrInvalid, c.Slice, enforce.MinSlice, enforce.MaxSlice)
	}
	if err := (enforce.ThreadSched{Slice: c.BESlice}).Validate(); err != nil {
		return fmt.Errorf("%w: qos.be_slice %v: give %v to %v", ErrInvalid, c.BESlice, enforce.MinSlice, enforce.MaxSlice)
	}
	if err := c.Config.WithDefaults().Validate(); err != nil {
		return fmt.Errorf("%w: qos: %v", ErrInvalid, err)
	}
	return nil
}

// QoSStatus is the controller's latest tick, served in GET /v1/usage and
// shown by `corepin ctl top` (nodecore.QoSStatus).
type QoSStatus = nodecore.QoSStatus

// StartQoS checks c and runs the QoS controller it describes over n's
// workloads until ctx ends (nodecore.Node.StartQoS). It returns at once.
func (n *Node) StartQoS(ctx context.Context, c QoSConfig) error {
	if err := c.Validate(); err != nil {
		return err
	}
	n.Node.StartQoS(ctx, &qos.Loop{Config: c.Config, Tick: c.Tick, Slice: c.Slice, BESlice: c.BESlice, Burst: c.Burst, SystemPSI: c.SystemPSI})
	return nil
}
