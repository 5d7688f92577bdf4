package e2evm

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// partitionEnv is COREPIN_E2E_PARTITION: unset skips TestVMPartition
// (make e2e-vm-partition sets it; make e2e-vm leaves it out).
const partitionEnv = "COREPIN_E2E_PARTITION"

// partJob is the job of the partition machines: it writes what the kernel
// says of its own group while it runs (its partition state, exclusive and
// effective CPUs, corepin root's exclusive CPUs, the root cgroup's
// isolated CPUs) and its affinity, as key=value lines.
const partJob = `cg=$(sed -n "s/^0:://p" /proc/self/cgroup); d=/sys/fs/cgroup$cg
{ echo "partition=$(cat $d/cpuset.cpus.partition)"
  echo "exclusive=$(cat $d/cpuset.cpus.exclusive 2>/dev/null)"
  echo "effective=$(cat $d/cpuset.cpus.effective)"
  echo "corepin.exclusive=$(cat $(dirname $d)/cpuset.cpus.exclusive 2>/dev/null)"
  echo "root.isolated=$(cat /sys/fs/cgroup/cpuset.cpus.isolated 2>/dev/null)"
  grep Cpus_allowed_list /proc/self/status | sed "s/:[[:space:]]*/=/"; } > /tmp/part.job`

// partAfter prints, after a run, what stays of its partitions: the root
// cgroup's isolated CPUs, corepin root's exclusive CPUs, and its groups.
const partAfter = `sh -c 'echo "root.isolated=$(cat /sys/fs/cgroup/cpuset.cpus.isolated 2>/dev/null)"
echo "corepin.exclusive=$(cat /sys/fs/cgroup/corepin/cpuset.cpus.exclusive 2>/dev/null)"
echo "groups=$(cd /sys/fs/cgroup/corepin && ls -d run-* 2>/dev/null | wc -l)"'`

// partitionShapes are two machines of 4 CPUs under cgroup v2. On 6.12
// (cpuset.cpus.exclusive, cpuset.cpus.isolated) a `corepin run --qos LSE
// --no-load-balance` job runs in an isolated partition that is gone when
// it ends, and a job asking for every CPU is refused with the kernel's
// reason; on 6.1 (no cpuset.cpus.exclusive) the partition cannot form
// below corepin's root and the job is refused with the kernel's reason.
var partitionShapes = []shape{{
	name: "part-6.12", kernel: kernel612, mem: 512, cg: "v2", qemu: []string{"-smp", "4"},
	script: `
echo "+cpuset +cpu" > /sys/fs/cgroup/cgroup.subtree_control
block part.run corepin run --no-db -o json --qos LSE --cpus 2 --no-load-balance --no-cpu-quota -- sh -c '` + partJob + `'
block part.job cat /tmp/part.job
block part.after ` + partAfter + `
block part.all corepin run --no-db -o json --qos LSE --cpus 4 --no-load-balance -- true
block part.all.after ` + partAfter + `
`,
}, {
	name: "part-6.1", kernel: kernel61, mem: 512, cg: "v2", qemu: []string{"-smp", "4"},
	script: `
echo "+cpuset +cpu" > /sys/fs/cgroup/cgroup.subtree_control
block part.refused corepin run --no-db -o json --qos LSE --cpus 2 --no-load-balance -- true
block part.after ` + partAfter + `
`,
}}

// TestVMPartition (make e2e-vm-partition): issue 31 §3's "isolated
// partition created and removed with the workload; a refusal where the
// CPUs cannot form one, with its reason", read from the kernel's own
// files in the machine. State only, never timing.
func TestVMPartition(t *testing.T) {
	if os.Getenv(partitionEnv) == "" {
		t.Skipf("%s is unset: make e2e-vm-partition runs this test", partitionEnv)
	}
	bin := os.Getenv("COREPIN_BIN")
	if bin == "" {
		need(t, "COREPIN_BIN, a static corepin binary (make build)")
	}
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		need(t, "busybox (apt-get install busybox-static)")
	}
	ird, err := buildInitrd(bin, busybox, partitionShapes, nil)
	if err != nil {
		t.Fatalf("building the initramfs: %v", err)
	}
	type row struct {
		Cpuset   string `json:"cpuset"`
		ExitCode int    `json:"exit_code"`
		Error    string `json:"error"`
	}
	rowOf := func(t *testing.T, v *vm, name string) row {
		t.Helper()
		b, ok := v.blocks[name]
		if !ok {
			t.Fatalf("no block %q; blocks %v", name, v.order)
		}
		var r row
		line, _, _ := strings.Cut(b.out, "\n")
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%s: %q: %v; stderr:\n%s", name, b.out, err, v.blocks[name+".err"].out)
		}
		return r
	}
	// nothingLeft: no isolated CPU, nothing exclusive on corepin's root,
	// no group.
	nothingLeft := func(t *testing.T, v *vm, name string) {
		t.Helper()
		after := kv(v.get(t, name))
		for k, want := range map[string]string{"root.isolated": "", "corepin.exclusive": "", "groups": "0"} {
			if after[k] != want {
				t.Errorf("%s: %s = %q, want %q (all of it: %v)", name, k, after[k], want, after)
			}
		}
	}
	t.Run("6.12", func(t *testing.T) {
		s := partitionShapes[0]
		s.initrd = ird
		v := boot(t, s)
		run := rowOf(t, v, "part.run")
		if run.ExitCode != 0 || run.Error != "" {
			t.Fatalf("the --no-load-balance job: exit %d, error %q; stderr:\n%s", run.ExitCode, run.Error, v.blocks["part.run.err"].out)
		}
		job := kv(v.get(t, "part.job"))
		t.Logf("while the job ran: %v", job)
		for k, want := range map[string]string{"partition": "isolated", "exclusive": run.Cpuset, "effective": run.Cpuset,
			"corepin.exclusive": run.Cpuset, "root.isolated": run.Cpuset, "Cpus_allowed_list": run.Cpuset} {
			if job[k] != want {
				t.Errorf("while the job ran on %s: %s = %q, want %q", run.Cpuset, k, job[k], want)
			}
		}
		nothingLeft(t, v, "part.after")
		all := rowOf(t, v, "part.all")
		t.Logf("a job on every CPU: exit %d, error %q", all.ExitCode, all.Error)
		if all.ExitCode == 0 || !strings.Contains(all.Error, "cannot take the CPUs out of load balancing") ||
			!strings.Contains(all.Error, `cpuset.cpus.partition "isolated invalid (`) {
			t.Errorf("a job on every CPU: exit %d, error %q, want it refused with the kernel's reason (isolated invalid (...))", all.ExitCode, all.Error)
		}
		nothingLeft(t, v, "part.all.after")
	})
	t.Run("6.1", func(t *testing.T) {
		s := partitionShapes[1]
		s.initrd = ird
		v := boot(t, s)
		r := rowOf(t, v, "part.refused")
		t.Logf("refused: exit %d, error %q", r.ExitCode, r.Error)
		want := `the kernel left cpuset.cpus.partition "isolated invalid (`
		if r.ExitCode == 0 || !strings.Contains(r.Error, want) || !strings.Contains(r.Error, "no cpuset.cpus.exclusive (Linux 6.7)") {
			t.Errorf("on 6.1: exit %d, error %q, want it refused saying %q and that the kernel lacks cpuset.cpus.exclusive", r.ExitCode, r.Error, want)
		}
		nothingLeft(t, v, "part.after")
	})
}
