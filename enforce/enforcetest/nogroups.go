// Package enforcetest holds enforce drivers for tests of the packages
// above enforce. Only tests import it.
package enforcetest

import (
	"errors"

	"github.com/corepin/corepin/enforce"
)

// NoGroups is a cgroup driver with no groups and able to make none:
// enough for an agent Node whose workloads are all local runs' jobs, or
// that only records its configuration, without root or cgroupfs.
type NoGroups struct{}

var _ interface {
	enforce.Driver
	enforce.Lister
} = NoGroups{}

func (NoGroups) Name() string { return "fake" }
func (NoGroups) Create(string, enforce.Resources) (enforce.Group, error) {
	return nil, errors.ErrUnsupported
}
func (NoGroups) Cleanup() ([]string, error)                   { return nil, nil }
func (NoGroups) Limitations() []string                        { return nil }
func (NoGroups) List() ([]enforce.Listed, error)              { return nil, nil }
func (NoGroups) Reopen(enforce.Listed) (enforce.Group, error) { return nil, errors.ErrUnsupported }
func (NoGroups) OpenExisting(string) (enforce.Group, error)   { return nil, errors.ErrUnsupported }
