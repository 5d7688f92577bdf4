package nodecore

import (
	"errors"
	"fmt"
	"math"
	"path"
	"strings"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/qos"
)

// Sentinel errors of an admission, whichever door asked (the agent's API
// maps ErrInvalid to 422, ErrExists and ErrRejected to 409, ErrNotFound to
// 404, ErrDiskFull to 507).
var (
	// ErrInvalid means a request is wrong as written: no state of the
	// node could admit it.
	ErrInvalid = errors.New("invalid workload")
	// ErrExists means a workload of that name is admitted already.
	ErrExists = errors.New("workload exists")
	// ErrNotFound means no workload has that name.
	ErrNotFound = errors.New("no such workload")
	// ErrRejected means the node cannot admit the request now (not enough
	// free CPUs of the kind asked for); it may succeed after a delete.
	ErrRejected = errors.New("rejected")
	// ErrDiskFull means the state file could not be written because its
	// disk is full (HTTP 507): nothing changed; retry once space is freed.
	ErrDiskFull = errors.New("the state file's disk is full")
)

// Bounds of a request.
const (
	// MaxArgs bounds the command line of a workload the agent starts.
	MaxArgs = 256
	// MaxNameLen bounds a workload name (a cgroup directory name part).
	MaxNameLen = 48
)

// Spec is a workload as a client asks for it: POST /v1/workloads. Exactly
// one of Command, PID and Cgroup says what runs in it.
type Spec struct {
	Name           string   `json:"name"`
	QoS            string   `json:"qos,omitempty"`
	CPUs           *float64 `json:"cpus"`
	Bind           string   `json:"bind,omitempty"`
	Exclusive      string   `json:"exclusive,omitempty"`
	NUMA           string   `json:"numa,omitempty"`
	TopologyPolicy string   `json:"topology_policy,omitempty"`
	// Isolated is "prefer" or "require": an LSE or LSR workload's use of
	// the CPUs the kernel isolated (alloc.Request.Isolated).
	Isolated string `json:"isolated,omitempty"`
	// Command and Args: the agent starts this program inside the
	// workload's group, with thread-pool variables (OMP_NUM_THREADS, ...)
	// sized to its CPUs.
	Command string   `json:"command,omitempty"`
	Args    []string `json:"args,omitempty"`
	// PID adopts a running process (all of its threads): the pid of its
	// leader, not the agent, a zombie, nor one corepin already runs.
	PID int `json:"pid,omitempty"`
	// Cgroup adopts an existing cgroup (a container's), given relative to
	// the cgroup mount point: one of the user's, not in or above a
	// corepin root nor another workload's.
	Cgroup string `json:"cgroup,omitempty"`
	// Sched is the LS real-time route (enforce.ParseRealTime): "rr" or
	// "fifo" puts every thread of the command the agent starts, or of the
	// process it adopts, in that class at priority 1, bounded to its CPUs'
	// worth of the LS pool (qos.RTShare); "" or "normal" is the fair class.
	Sched string `json:"sched,omitempty"`
	// IRQIsolate keeps movable device interrupts off an LSE or LSR
	// workload's CPUs while it holds them (package irq); refused for LS
	// and BE, whose CPUs are shared.
	IRQIsolate bool `json:"irq_isolate,omitempty"`
	// LoadBalance false takes an LSE or LSR workload's CPUs out of the
	// scheduler's load balancing while it holds them
	// (enforce.Resources.NoLoadBalance): its group an isolated partition
	// on cgroup v2, cpuset.sched_load_balance 0 on v1. Where the kernel
	// or the cgroup layout cannot, the create fails with the reason.
	// Absent or true: balanced as usual.
	LoadBalance *bool `json:"load_balance,omitempty"`
	// CPUQuota false asks for no CFS quota on an LSE or LSR workload's
	// group (cpu.cfs_quota_us -1, cpu.max max): what the agent gives
	// every exclusive workload, its own groups and adopted cgroups alike,
	// so it is checked and recorded, and changes nothing. Absent or true:
	// the class's own rule.
	CPUQuota *bool `json:"cpu_quota,omitempty"`
}

// NoLoadBalance reports whether s asks for load_balance false.
func (s Spec) NoLoadBalance() bool { return s.LoadBalance != nil && !*s.LoadBalance }

// NoCPUQuota reports whether s asks for cpu_quota false.
func (s Spec) NoCPUQuota() bool { return s.CPUQuota != nil && !*s.CPUQuota }

// ValidateName reports whether name may name a workload: what
// enforce.ValidateName allows (letters, digits, '-', '_', '.'; no "..", no
// leading '.' or '-'), at most MaxNameLen bytes.
func ValidateName(name string) error {
	if len(name) > MaxNameLen {
		return fmt.Errorf("%w: name %.20q... is longer than %d bytes", ErrInvalid, name, MaxNameLen)
	}
	if err := enforce.ValidateName(name); err != nil {
		return fmt.Errorf("%w: name: %v", ErrInvalid, err)
	}
	return nil
}

// Validate checks s on its own, without the node's state: its name, its
// vocabulary and sizes (as alloc reads them) and what runs in it. Errors
// wrap ErrInvalid.
func (s Spec) Validate() error {
	if err := ValidateName(s.Name); err != nil {
		return err
	}
	r, err := s.request()
	if err != nil {
		return err
	}
	if s.IRQIsolate && r.QoS != alloc.LSE && r.QoS != alloc.LSR {
		return fmt.Errorf("%w: workload %q: irq_isolate keeps interrupts off CPUs of the workload's own: qos %s shares its CPUs; use \"qos\": \"LSE\" or \"LSR\"",
			ErrInvalid, s.Name, r.QoS)
	}
	if err := s.checkLowLatency(r.QoS); err != nil {
		return err
	}
	n := 0
	if s.Command != "" {
		n++
	}
	if s.PID != 0 {
		n++
	}
	if s.Cgroup != "" {
		n++
	}
	switch {
	case n != 1:
		return fmt.Errorf("%w: workload %q needs exactly one of command, pid or cgroup (got %d)", ErrInvalid, s.Name, n)
	case len(s.Args) > 0 && s.Command == "":
		return fmt.Errorf("%w: workload %q has args but no command", ErrInvalid, s.Name)
	case len(s.Args) > MaxArgs:
		return fmt.Errorf("%w: workload %q has %d args; at most %d", ErrInvalid, s.Name, len(s.Args), MaxArgs)
	case s.PID < 0 || s.PID > 1<<22:
		return fmt.Errorf("%w: workload %q: pid %d is not a Linux pid", ErrInvalid, s.Name, s.PID)
	case s.PID == 1:
		return fmt.Errorf("%w: workload %q: pid 1 (init) cannot be adopted", ErrInvalid, s.Name)
	}
	for _, a := range append([]string{s.Command}, s.Args...) {
		if strings.ContainsRune(a, 0) {
			return fmt.Errorf("%w: workload %q: command or argument contains a NUL byte", ErrInvalid, s.Name)
		}
	}
	if s.Command != "" && !path.IsAbs(s.Command) && strings.Contains(s.Command, "/") {
		return fmt.Errorf("%w: workload %q: command %q must be absolute or a bare name looked up in PATH", ErrInvalid, s.Name, s.Command)
	}
	if err := s.checkSched(); err != nil {
		return err
	}
	if s.Cgroup != "" {
		for _, el := range strings.Split(s.Cgroup, "/") {
			if el == ".." {
				return fmt.Errorf("%w: workload %q: cgroup %q climbs out of the mount with \"..\"", ErrInvalid, s.Name, s.Cgroup)
			}
		}
		if strings.ContainsRune(s.Cgroup, 0) || path.Clean("/"+s.Cgroup) == "/" {
			return fmt.Errorf("%w: workload %q: cgroup %q is not a cgroup below the root", ErrInvalid, s.Name, s.Cgroup)
		}
	}
	return nil
}

// checkLowLatency refuses load_balance and cpu_quota false but on an LSE
// or LSR workload, and load_balance false on an adopted cgroup (a
// partition's ancestors would be the runtime's groups, not corepin's).
func (s Spec) checkLowLatency(q alloc.QoS) error {
	exclusive := q == alloc.LSE || q == alloc.LSR
	switch {
	case s.NoLoadBalance() && !exclusive:
		return fmt.Errorf("%w: workload %q: load_balance false takes CPUs of the workload's own out of the scheduler's balancing: qos %s shares its CPUs; use \"qos\": \"LSE\" or \"LSR\"",
			ErrInvalid, s.Name, q)
	case s.NoCPUQuota() && !exclusive:
		return fmt.Errorf("%w: workload %q: cpu_quota false applies to an LSE or LSR workload's group: qos %s is bounded by its quota or weight on the shared pool",
			ErrInvalid, s.Name, q)
	case s.NoLoadBalance() && s.Cgroup != "":
		return fmt.Errorf("%w: workload %q: load_balance false applies to a command the agent starts or a pid it adopts; an adopted cgroup's ancestors are its runtime's (use the pod annotation corepin.io/load-balance)",
			ErrInvalid, s.Name)
	}
	return nil
}

// checkSched refuses an unknown class, and the real-time route anywhere
// but on an LS workload the agent starts or adopts by pid.
func (s Spec) checkSched() error {
	rt, err := enforce.ParseRealTime(s.Sched)
	switch {
	case err != nil:
		return fmt.Errorf("%w: workload %q: sched %q: use normal, rr or fifo", ErrInvalid, s.Name, s.Sched)
	case rt.IsZero():
		return nil
	case s.QoS != string(alloc.LS):
		return fmt.Errorf("%w: workload %q: sched %s is the real-time route of LS work on the shared pool, beside BE work; qos %q: use \"qos\": \"LS\" (LSE and LSR workloads have CPUs of their own, a BE workload must never preempt others)",
			ErrInvalid, s.Name, rt, s.QoS)
	case s.Cgroup != "":
		return fmt.Errorf("%w: workload %q: sched %s applies to a command the agent starts or a pid it adopts; a container's class is its runtime's to set (the NRI plugin's annotation)", ErrInvalid, s.Name, rt)
	}
	return nil
}

// checkQuota refuses an LS quota below the kernel's shortest, 0 and
// sizes alloc would round to 0 included: it reads the size as written
// (in milli-CPUs as alloc rounds it), so that alloc's own refusal of an
// empty quota never speaks first. A size outside alloc's range is left
// to alloc to name.
func checkQuota(s Spec) error {
	if s.CPUs == nil || !(*s.CPUs >= 0) {
		return nil
	}
	m := math.Round(*s.CPUs * 1000)
	ls := s.QoS == string(alloc.LS) || s.QoS == "" && math.Mod(m, 1000) != 0
	if ls && m < float64(qos.MinQuotaMilliCPUs) {
		return fmt.Errorf("%w: workload %q: an LS quota of %v CPUs is below the minimum, %v CPUs (the kernel's shortest quota, %v per %v period); ask for at least %v",
			ErrInvalid, s.Name, *s.CPUs, qos.MinQuotaCPUs, enforce.MinQuota, enforce.DefaultPeriod, qos.MinQuotaCPUs)
	}
	return nil
}

// request converts s to the allocator's request, wrapping alloc's
// vocabulary errors in ErrInvalid.
func (s Spec) request() (alloc.Request, error) {
	if err := checkQuota(s); err != nil {
		return alloc.Request{}, err
	}
	rs := alloc.RequestSpec{ID: s.Name, CPUs: s.CPUs, QoS: s.QoS, Bind: s.Bind, Exclusive: s.Exclusive,
		NUMA: s.NUMA, TopologyPolicy: s.TopologyPolicy, Isolated: s.Isolated}
	r, err := rs.Request(s.Name)
	if err != nil {
		return alloc.Request{}, fmt.Errorf("%w: %v", ErrInvalid, strings.TrimPrefix(err.Error(), alloc.ErrInvalid.Error()+": "))
	}
	if r.QoS == alloc.SYSTEM {
		return alloc.Request{}, fmt.Errorf("%w: workload %q: qos SYSTEM is the reserved CPUs and not admitted through the agent", ErrInvalid, s.Name)
	}
	return r, nil
}

// Record is what the store keeps per workload as its request document
// (the assignment's request column, JSON): the spec as admitted plus what
// the allocator decided beyond the cpuset. Its keys are the state file's
// format: add keys, never rename one.
type Record struct {
	Spec
	MilliCPUs int    `json:"milli_cpus,omitempty"`
	Excl      string `json:"exclusive_level,omitempty"`
	NUMANodes string `json:"numa_nodes,omitempty"`
	Threads   int    `json:"threads"`
	// Adopted marks a workload the reconcile found running without an
	// assignment (a live group after the state was lost).
	Adopted bool `json:"adopted,omitempty"`
	// Owner and Job mark a reservation of a local `corepin run` job
	// (StatePlacer): no group of the agent's, held while the owner or the
	// job's group lives.
	Owner *Owner `json:"owner,omitempty"`
	Job   string `json:"job,omitempty"`
	// Container marks a container a runtime runs and enforces (the NRI
	// plugin, Containers): no group of the agent's, held until the
	// runtime reports the container removed or gone.
	Container *ContainerRef `json:"container,omitempty"`
	// Deleting marks a workload whose delete was committed: its
	// processes are being (or were) stopped, and the assignment goes
	// once they are. A restart or sweep finishes the delete.
	Deleting bool `json:"deleting,omitempty"`
	// Added are the CPUs resizes added to an LSE or LSR workload beyond
	// those it was placed on, in the order added (alloc.Assignment.Added).
	Added []int `json:"added_cpus,omitempty"`
	// BERoute is how a BE container of the NRI plugin is kept out of the
	// other workloads' way (the plugin's BERoute names: idle-parent, runtime-sched-idle,
	// plugin-sched-idle, min-weight), set once it started; empty before,
	// and for every other workload.
	BERoute string `json:"be_route,omitempty"`
}
