package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/corepin/corepin/alloc"
	"github.com/corepin/corepin/cpuset"
	"github.com/corepin/corepin/enforce"
	"github.com/corepin/corepin/experiment"
	"github.com/corepin/corepin/nodecore"
	"github.com/corepin/corepin/proc"
	"github.com/corepin/corepin/qos"
	"github.com/corepin/corepin/store"
	"github.com/corepin/corepin/wakescan"
)

func init() { Register(func() Experiment { return &colocationExp{} }) }

// Colocation policies: where the service and the batch run and with what
// priority. The nice patterns are the nice study's four.
const (
	polAlone        = "alone"       // the service alone: the baseline
	polBatchAlone   = "batch-alone" // the batch alone: its own baseline
	polNone         = "none"        // batch and service in one group, no priority
	polNice         = "nice"        // batch at nice 19 in its own group
	polNiceBatchLim = "nice+batch-limit"
	polNiceSvcLim   = "nice+service-limit"
	polNiceBothLim  = "nice+both-limits"
	polWeight       = "weight"   // batch group at the minimal weight
	polIdle         = "idle"     // batch group cpu.idle
	polLSE          = "lse"      // service on exclusive whole cores (LSE/FullPCPUs), batch on the rest
	polLSR          = "lsr"      // service bound (LSR/SpreadByPCPUs), batch BE may borrow its CPUs
	polCorepin      = "corepin"  // corepin's default: service LS, batch BE under the idle corepin-be root
	polRTRR         = "rt-rr"    // corepin's, the service's threads in SCHED_RR (the LS real-time route)
	polRTFIFO       = "rt-fifo"  // corepin's, the service's threads in SCHED_FIFO
	polScan         = "scan"     // corepin's, SIS_UTIL off while the batch runs (wake_scan full)
	svcCPU          = "cpu"      // the built-in CPU-cost service
	svcNginx        = "nginx"    // real nginx serving a small static file
	toolOpenLoop    = "openloop" // corepin's open-loop generator
	toolWrk         = "wrk"
)

// AllPolicies lists every colocation policy, baselines first.
var AllPolicies = append([]string{polAlone, polBatchAlone, polNone, polNice, polNiceBatchLim, polNiceSvcLim, polNiceBothLim,
	polWeight, polIdle, polLSE, polLSR, polCorepin, polRTRR, polRTFIFO, polScan}, qosPolicies...)

type colocationSpec struct {
	Services []string `yaml:"services" json:"services"`
	Policies []string `yaml:"policies" json:"policies"`
	// NginxPolicies, when set, is the policy list for nginx.
	NginxPolicies []string `yaml:"nginx_policies" json:"nginx_policies"`
	// CostMS is the CPU cost of one request to the built-in service.
	CostMS float64 `yaml:"cost_ms" json:"cost_ms"`
	// LoadFraction sizes the open-loop rate so the built-in service uses
	// this fraction of the machine's CPUs alone.
	LoadFraction float64 `yaml:"load_fraction" json:"load_fraction"`
	// NginxRate is the open-loop rate against nginx.
	NginxRate   float64       `yaml:"nginx_rate" json:"nginx_rate"`
	Tool        string        `yaml:"tool" json:"tool"`
	Connections int           `yaml:"connections" json:"connections"`
	Warmup      time.Duration `yaml:"warmup" json:"warmup"`
	Duration    time.Duration `yaml:"duration" json:"duration"`
	// BatchJobs is how many CPU-saturating processes the batch runs (0: one
	// per allowed CPU), each with as many threads as allowed CPUs.
	BatchJobs int `yaml:"batch_jobs" json:"batch_jobs"`
	// GeneratorClass is the load generator's scheduling class: normal, rr
	// or fifo; auto (or empty) is fifo where the generator shares the CPUs
	// under test (machines with fewer than 4) and the right to a real-time
	// class is there, normal otherwise. The generator stands in for
	// clients on other machines: in the fair class beside the parties it
	// measures, its own waits for a CPU count as the service's latency.
	GeneratorClass string `yaml:"generator_class" json:"generator_class"`
}

type colocationExp struct {
	spec   colocationSpec
	be     enforce.Driver // the idle corepin-be root, for BE batches
	hasNgx bool
	// scan holds the wake_scan switch for the scan policy's points, on
	// the shared state file (scanDB) as `corepin run --wake-scan full`
	// does; nil when the policy is not measured.
	scan   *wakescan.Scan
	scanDB *store.DB
	// scanRoot is the machine whose features file the scan policy
	// switches: "" for this one; tests give a directory.
	scanRoot string
	// genRT is the load generator's class, GeneratorClass resolved.
	genRT enforce.RealTime
}

const genAuto = "auto"

// generatorClass resolves the spec's generator_class on a machine whose
// CPUs under test the generator shares or not; what it says is why auto
// kept the fair class ("" when it did not).
func generatorClass(class string, shares bool) (enforce.RealTime, string, error) {
	if class == "" || class == genAuto {
		if !shares {
			return enforce.RealTime{}, "", nil
		}
		rt := enforce.RealTime{Policy: enforce.RTFIFO}
		if err := enforce.CheckRealTime(rt); err != nil {
			return enforce.RealTime{}, fmt.Sprintf("the load generator shares the CPUs under test and stays in the fair class: %v", err), nil
		}
		return rt, "", nil
	}
	rt, err := enforce.ParseRealTime(class)
	if err != nil {
		return rt, "", fmt.Errorf("%w: colocation generator_class %q: use auto, normal, rr or fifo", experiment.ErrUsage, class)
	}
	if err := enforce.CheckRealTime(rt); err != nil {
		return rt, "", fmt.Errorf("colocation generator_class %s: %w", class, err)
	}
	return rt, "", nil
}

func (e *colocationExp) Name() string { return "colocation" }
func (e *colocationExp) Title() string {
	return "a latency-sensitive service beside a CPU-saturating batch, per isolation policy"
}

func (e *colocationExp) Spec(quick bool) any {
	e.spec = colocationSpec{
		Services: []string{svcCPU, svcNginx},
		// scan changes a machine-wide setting: only when asked for.
		Policies:     slices.DeleteFunc(slices.Clone(AllPolicies), func(p string) bool { return p == polScan }),
		CostMS:       3,
		LoadFraction: 0.25,
		NginxRate:    2000,
		Tool:         toolOpenLoop,
		Connections:  16,
		Warmup:       time.Second,
		Duration:     8 * time.Second,
	}
	if quick {
		// Fewer policies, each measured long enough for a p99 of ~800
		// requests: the bar compares p99s within 10%.
		e.spec.Policies = []string{polAlone, polBatchAlone, polNone, polNice, polIdle, polCorepin, polQoS, polRTRR}
		e.spec.NginxPolicies = []string{polAlone, polNone, polCorepin, polRTRR}
		e.spec.Warmup = 500 * time.Millisecond
		e.spec.Duration = 5 * time.Second
		e.spec.NginxRate = 1000
	}
	return &e.spec
}

func (e *colocationExp) Setup(ctx context.Context, env *Env) error {
	if e.spec.Services == nil {
		e.Spec(env.Quick)
	}
	for _, p := range append(slices.Clone(e.spec.Policies), e.spec.NginxPolicies...) {
		if !slices.Contains(AllPolicies, p) {
			return fmt.Errorf("%w: colocation policy %q: choose from %s", experiment.ErrUsage, p, strings.Join(AllPolicies, ", "))
		}
	}
	if e.spec.Tool != toolOpenLoop && e.spec.Tool != toolWrk {
		return fmt.Errorf("%w: colocation tool %q: use openloop or wrk", experiment.ErrUsage, e.spec.Tool)
	}
	if _, err := proc.LookPath("nginx"); err == nil {
		e.hasNgx = true
	} else if slices.Contains(e.spec.Services, svcNginx) {
		env.Logf("colocation: nginx not installed (Debian package nginx): measuring the built-in service only")
	}
	rt, why, err := generatorClass(e.spec.GeneratorClass, env.Topo.Allowed().Size() < 4)
	if err != nil {
		return err
	}
	if why != "" {
		env.Logf("colocation: %s", why)
	}
	e.genRT = rt
	if env.Driver == nil || env.Driver.Name() == enforce.NameAffinity {
		return fmt.Errorf("colocation needs a writable cgroup (cgroup v1 or v2) to compare group priorities")
	}
	be, err := idleBERoot()
	if err != nil {
		return err
	}
	e.be = be
	// The real-time route needs the right to it: without, its policies
	// are left out, said once.
	if err := enforce.CheckRealTime(enforce.RealTime{Policy: enforce.RTRR}); err != nil {
		isRT := func(p string) bool { return p == polRTRR || p == polRTFIFO }
		if slices.ContainsFunc(e.spec.Policies, isRT) || slices.ContainsFunc(e.spec.NginxPolicies, isRT) {
			env.Logf("colocation: leaving out %s and %s: %v", polRTRR, polRTFIFO, err)
		}
		e.spec.Policies = slices.DeleteFunc(e.spec.Policies, isRT)
		e.spec.NginxPolicies = slices.DeleteFunc(e.spec.NginxPolicies, isRT)
	}
	isScan := func(p string) bool { return p == polScan }
	if slices.ContainsFunc(e.spec.Policies, isScan) || slices.ContainsFunc(e.spec.NginxPolicies, isScan) {
		if why := e.openScan(); why != "" {
			env.Logf("colocation: leaving out %s: %s", polScan, why)
			e.spec.Policies = slices.DeleteFunc(e.spec.Policies, isScan)
			e.spec.NginxPolicies = slices.DeleteFunc(e.spec.NginxPolicies, isScan)
		}
	}
	return nil
}

// openScan makes the scan policy's handle on the wake_scan switch (the
// shared state file records the value found, as for `corepin run
// --wake-scan full`, so a crashed bench is undone by the next holder);
// it says why the policy cannot be measured here ("" when it can).
func (e *colocationExp) openScan() string {
	scan, db, _, err := nodecore.OpenWakeScan(os.Getenv(nodecore.EnvState), e.scanRoot, "bench")
	if ue, ok := errors.AsType[*nodecore.WakeScanUnavailable](err); ok {
		return ue.Short
	}
	if err != nil {
		return err.Error()
	}
	e.scan, e.scanDB = scan, db
	return ""
}

// idleBERoot is corepin's own BE parent, as `corepin run --qos BE` sets
// it up: the driver under the corepin-be root, that root made idle
// against its siblings (cpu.idle 1, or the lowest weight where the kernel
// lacks cpu.idle).
func idleBERoot() (enforce.Driver, error) {
	be, err := enforce.Detect(enforce.WithRoot("corepin-be"))
	if err != nil {
		return nil, err
	}
	if rp, ok := be.(enforce.RootPrioritizer); ok {
		if _, err := rp.SetRootIdle(); err != nil {
			return nil, err
		}
	}
	return be, nil
}

func (e *colocationExp) Teardown(*Env) error {
	if e.scanDB == nil {
		return nil
	}
	_, err := e.scan.Release() // a point that failed to release
	err = errors.Join(err, e.scanDB.Close())
	e.scan, e.scanDB = nil, nil
	return err
}

func (e *colocationExp) Points(env *Env) []experiment.Point {
	if e.spec.Services == nil {
		e.Spec(env.Quick)
	}
	var ps []experiment.Point
	for _, s := range e.spec.Services {
		if s == svcNginx && !e.hasNgx && e.be != nil {
			continue
		}
		pols := e.spec.Policies
		if s == svcNginx && e.spec.NginxPolicies != nil {
			pols = e.spec.NginxPolicies
		}
		for _, p := range pols {
			ps = append(ps, experiment.P("service", s, "policy", p))
		}
	}
	return ps
}

// placement is where one point puts its three parties.
type placement struct {
	svcCPUs, batchCPUs, genCPUs cpuset.CPUSet
	svcRes, batchRes            enforce.Resources
	batchDriver                 enforce.Driver
	sameGroup                   bool             // batch joins the service's group
	nice                        bool             // batch at nice 19
	svcRT                       enforce.RealTime // the service's threads' class (the LS real-time route)
	genRT                       enforce.RealTime // the load generator's class (colocationSpec.GeneratorClass)
	scan                        bool             // SIS_UTIL off while the batch runs (colocationExp.scan)
}

// place decides the groups of a policy. The load generator gets a CPU of
// its own when the machine has 4 or more; below that it shares.
func (e *colocationExp) place(env *Env, policy string) (placement, error) {
	all := env.Topo.Allowed()
	pl := placement{genCPUs: all, batchDriver: env.Driver, genRT: e.genRT}
	work := all
	if all.Size() >= 4 {
		gen := cpuset.New(all.Max())
		if c, ok := env.Topo.CPU(all.Max()); ok {
			gen = env.Topo.CoreCPUs(c.Core).Intersection(all)
		}
		pl.genCPUs = gen
		work = all.Difference(gen)
	}
	pl.svcCPUs, pl.batchCPUs = work, work
	pl.svcRes = enforce.Resources{CPUs: work}
	pl.batchRes = enforce.Resources{CPUs: work}
	half := time.Duration(float64(work.Size()) / 2 * float64(enforce.DefaultPeriod))
	switch policy {
	case polNone:
		pl.sameGroup = true
	case polNice:
		pl.nice = true
	case polNiceBatchLim:
		pl.nice, pl.batchRes.Quota = true, half
	case polNiceSvcLim:
		pl.nice, pl.svcRes.Quota = true, half
	case polNiceBothLim:
		pl.nice, pl.batchRes.Quota, pl.svcRes.Quota = true, half, half
	case polWeight:
		pl.batchRes.Weight = 1
	case polIdle:
		pl.batchRes.Idle = true
	case polLSE, polLSR:
		bind := alloc.BindFullPCPUs
		if policy == polLSR {
			bind = alloc.BindSpreadByPCPUs
		}
		st, err := alloc.NewState(env.Topo, alloc.NodeSettings{Reserved: env.Topo.Online().Difference(work)})
		if err != nil {
			return pl, err
		}
		need := max(1, int(math.Ceil(float64(work.Size())*e.spec.LoadFraction*2)))
		need = min(need, work.Size()-1)
		if need < 1 {
			return pl, fmt.Errorf("policy %s needs at least 2 CPUs", policy)
		}
		p, err := st.Allocate(alloc.Request{ID: "service", CPUs: need, QoS: alloc.LSE, Bind: bind, TopologyPolicy: alloc.TopologyBestEffort})
		if err != nil {
			return pl, err
		}
		pl.svcCPUs = p.CPUs
		pl.svcRes.CPUs = p.CPUs
		if policy == polLSE {
			pl.batchCPUs = work.Difference(p.CPUs)
			pl.batchRes.CPUs = pl.batchCPUs
		} else {
			pl.batchRes.Idle = true // BE borrows the LSR CPUs when idle
			pl.batchDriver = e.be
		}
	case polCorepin, polSuppressCpuset, polSuppressQuota, polInterference, polSlice, polBESlice, polQoS:
		pl.batchRes.Idle = true
		pl.batchDriver = e.be
	case polScan:
		pl.batchRes.Idle = true
		pl.batchDriver = e.be
		pl.scan = true
	case polRTRR, polRTFIFO:
		// corepin's default, and the service's threads in a real-time
		// class bounded to what it needs alone, twice over (as lse sizes
		// its CPUs).
		pl.batchRes.Idle = true
		pl.batchDriver = e.be
		pl.svcRT = enforce.RealTime{Policy: enforce.RTRR}
		if policy == polRTFIFO {
			pl.svcRT.Policy = enforce.RTFIFO
		}
		pl.svcRes.RTShare = qos.RTShare(float64(work.Size())*e.spec.LoadFraction*2, work.Size())
	case polThreadIdle:
		// corepin's own root, not the idle BE root: SCHED_IDLE per
		// thread (startQoS) is the only lever, as on kernels before 5.15.
	}
	return pl, nil
}

func (e *colocationExp) CurrentSpec() any { return &e.spec }
