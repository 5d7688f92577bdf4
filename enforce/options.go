package enforce

import (
	"fmt"
	"path"
)

// DefaultRoot is the name of corepin's root group in each hierarchy.
const DefaultRoot = "corepin"

// Option configures Detect and the New* constructors.
type Option func(*config)

type config struct {
	root      string
	parent    string
	mountinfo string
	procRoot  string
	// self and alive are replaced by tests.
	self  *owner
	alive func(owner) bool
}

func newConfig(opts []Option) config {
	c := config{root: DefaultRoot, parent: "/", mountinfo: "/proc/self/mountinfo", procRoot: "/proc"}
	for _, o := range opts {
		o(&c)
	}
	if c.alive == nil {
		proc := c.procRoot
		c.alive = func(o owner) bool { return o.Alive(proc) }
	}
	return c
}

// rootAndOwner checks the configured parent and root name and returns
// corepin's root group path (relative to a mount point) and the owner that
// names this process's groups.
func (c config) rootAndOwner() (string, owner, error) {
	parent, err := cleanParent(c.parent)
	if err != nil {
		return "", owner{}, err
	}
	if err := ValidateName(c.root); err != nil {
		return "", owner{}, fmt.Errorf("checking root name: %w", err)
	}
	self, err := c.owner()
	if err != nil {
		return "", owner{}, err
	}
	return path.Join(parent, c.root), self, nil
}

func (c config) owner() (owner, error) {
	if c.self != nil {
		return *c.self, nil
	}
	return self()
}

// WithRoot names corepin's root group (default DefaultRoot). Tests use a
// unique name so they cannot touch a real run's groups.
func WithRoot(name string) Option { return func(c *config) { c.root = name } }

// WithParent puts corepin's root group under the cgroup at path p, relative
// to each hierarchy's mount point (default "/", the mount point itself).
// For cgroup v2, p must have no processes of its own (the "no internal
// processes" rule), or enabling controllers for its children fails.
func WithParent(p string) Option { return func(c *config) { c.parent = p } }

// WithMountinfo makes Detect read the mount table from file instead of
// /proc/self/mountinfo.
func WithMountinfo(file string) Option { return func(c *config) { c.mountinfo = file } }
