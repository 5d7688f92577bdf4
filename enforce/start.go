package enforce

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// shimArg0 is the argv[0] a shim is started with. ShimMain acts only on
// it (plus two pipe descriptors), never on the environment, so no variable
// a user sets or a job inherits can turn a corepin process into a shim.
const shimArg0 = "corepin-enforce-shim"

// shimEnv was the variable that once started the shim. It is removed from
// every started command's environment so an old value cannot leak on.
const shimEnv = "COREPIN_ENFORCE_SHIM"

// shimEnviron is the whole environment of the shim itself: one P (the
// job's GOMAXPROCS must not size the shim's runtime) and nothing else.
// The command's environment reaches the exec through the release pipe.
var shimEnviron = []string{"GOMAXPROCS=1"}

// maxShimEnv bounds the environment the shim accepts on its pipe; the
// kernel's own limit on argv plus envp is a quarter of the stack rlimit,
// 2 MiB by default (execve(2), "Limits on size of arguments").
const maxShimEnv = 8 << 20

// Start starts cmd with its process already in g, so that the command
// runs none of its own code outside the group:
//
//   - on cgroup v2 (Linux 5.7+) the kernel creates the child inside the
//     group (clone3 with CLONE_INTO_CGROUP, through
//     syscall.SysProcAttr.UseCgroupFD);
//   - otherwise cmd is started through a shim: this same executable
//     (os.Executable), which must call ShimMain first thing in main. The
//     shim blocks on a pipe; Start adds the shim's pid to g, releases it,
//     and the shim execs cmd's program in place, so the pid, the group and
//     cmd.Process stay the same.
//
// Start returns after the exec succeeded; when it failed (or adding to the
// group did), Start waits for the shim and returns the error, so there is
// nothing to Wait for. Otherwise use cmd.Wait as after cmd.Start. Start
// does not change cmd's Path, Args, Env or ExtraFiles as the caller sees
// them afterwards, and uses a copy of cmd.SysProcAttr.
func Start(g Group, cmd *exec.Cmd) error {
	return StartContext(context.Background(), g, cmd)
}

// StartContext is Start, except that while it waits for the shim to exec
// (cgroup v1), a cancelled ctx kills the shim and Start returns ctx's
// error. A nil g starts cmd without a group (cmd.Start).
func StartContext(ctx context.Context, g Group, cmd *exec.Cmd) error {
	if g == nil {
		if cmd.Env != nil {
			cmd.Env = withoutShimEnv(cmd.Env)
		}
		return cmd.Start()
	}
	return start(ctx, g, cmd, "", cloneIntoCgroup())
}

// withoutShimEnv returns env without shimEnv.
func withoutShimEnv(env []string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, shimEnv+"=") })
}

// StartRealTime is StartContext for a workload whose threads run in rt:
// always through the shim, which joins the group first and then, on the
// thread that execs the command, takes rt; the command's every thread
// inherits it (sched(7)). On cgroup v1 with real-time group scheduling the
// group must hold a real-time share (Resources.RTShare), or the kernel
// refuses the class (EPERM). A zero rt is StartContext.
func StartRealTime(ctx context.Context, g Group, cmd *exec.Cmd, rt RealTime) error {
	if rt.IsZero() {
		return StartContext(ctx, g, cmd)
	}
	if cmd.Process != nil {
		return errors.New("starting command: already started")
	}
	if cmd.Err != nil {
		return fmt.Errorf("starting command: %w", cmd.Err)
	}
	return startShimClass(ctx, g, cmd, "", rt)
}

// Shim payload kinds: the first byte of what Start sends the shim.
const (
	shimPlain    = 1 // exec as is
	shimRealTime = 2 // a class byte follows (shimClass), taken before the exec
)

// shimClass maps a real-time policy to its byte in the payload, and back.
var shimClass = map[string]byte{RTRR: 'r', RTFIFO: 'f'}

// start is Start with the shim executable ("" for os.Executable) and the
// use of CLONE_INTO_CGROUP chosen by the caller (tests).
func start(ctx context.Context, g Group, cmd *exec.Cmd, shim string, cloneInto bool) error {
	if cmd.Process != nil {
		return errors.New("starting command: already started")
	}
	if cmd.Err != nil {
		return fmt.Errorf("starting command: %w", cmd.Err)
	}
	if o, ok := g.(cgroupDirOpener); ok && cloneInto {
		return startInto(o, cmd)
	}
	return startShim(ctx, g, cmd, shim)
}

func startInto(o cgroupDirOpener, cmd *exec.Cmd) error {
	dir, err := o.OpenDir()
	if err != nil {
		return fmt.Errorf("starting command: %w", err)
	}
	defer dir.Close()
	var attr syscall.SysProcAttr
	if cmd.SysProcAttr != nil {
		attr = *cmd.SysProcAttr
	}
	attr.UseCgroupFD = true
	attr.CgroupFD = int(dir.Fd())
	saved, env := cmd.SysProcAttr, cmd.Env
	cmd.SysProcAttr = &attr
	cmd.Env = withoutShimEnv(cmd.Environ())
	err = cmd.Start()
	cmd.SysProcAttr, cmd.Env = saved, env
	if err != nil {
		return fmt.Errorf("starting command in cgroup: %w", err)
	}
	return nil
}

func startShim(ctx context.Context, g Group, cmd *exec.Cmd, shim string) error {
	return startShimClass(ctx, g, cmd, shim, RealTime{})
}

// startShimClass starts cmd through the shim (a nil g: no group to join),
// the shim taking rt before its exec.
func startShimClass(ctx context.Context, g Group, cmd *exec.Cmd, shim string, rt RealTime) (err error) {
	if shim == "" {
		if shim, err = os.Executable(); err != nil {
			return fmt.Errorf("finding shim: %w", err)
		}
	}
	goR, goW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("starting command: %w", err)
	}
	defer goW.Close()
	stR, stW, err := os.Pipe()
	if err != nil {
		goR.Close()
		return fmt.Errorf("starting command: %w", err)
	}
	defer stR.Close()

	path, args, env, extra := cmd.Path, cmd.Args, cmd.Env, cmd.ExtraFiles
	if len(args) == 0 {
		args = []string{path}
	}
	jobEnv := withoutShimEnv(cmd.Environ())
	var payload []byte
	payload = append(payload, shimPlain)
	if !rt.IsZero() {
		payload = append(payload[:0], shimRealTime, shimClass[rt.Policy])
	}
	for _, kv := range jobEnv {
		payload = append(append(payload, kv...), 0)
	}
	if len(payload) > maxShimEnv {
		goR.Close()
		stW.Close()
		return fmt.Errorf("starting command: environment of %d bytes above %d", len(payload), maxShimEnv)
	}
	fd := 3 + len(extra)
	cmd.Env = shimEnviron
	cmd.ExtraFiles = append(extra[:len(extra):len(extra)], goR, stW)
	cmd.Path = shim
	cmd.Args = append([]string{shimArg0, strconv.Itoa(fd) + "," + strconv.Itoa(fd+1), path}, args...)
	err = cmd.Start()
	cmd.Path, cmd.Args, cmd.Env, cmd.ExtraFiles = path, args, env, extra
	goR.Close()
	stW.Close()
	if err != nil {
		return fmt.Errorf("starting shim: %w", err)
	}

	if g == nil {
		// No group to join: nothing to do before the release.
	} else if err := g.AddProc(cmd.Process.Pid); err != nil {
		goW.Close() // the shim exits without exec
		cmd.Wait()
		return fmt.Errorf("starting command: %w", err)
	}
	// A cancelled ctx kills the shim wherever it is: blocked on the pipe,
	// or (on a machine too busy to run it) not yet at exec.
	stop := context.AfterFunc(ctx, func() { _ = cmd.Process.Kill() })
	defer stop()
	// Cancelled already: never release the shim (the kill above runs on
	// its own goroutine, which a busy machine may not run before the exec).
	if ctx.Err() != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return fmt.Errorf("releasing shim: %w", ctx.Err())
	}
	if _, err := goW.Write(payload); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		if ctx.Err() != nil {
			return fmt.Errorf("releasing shim: %w", ctx.Err())
		}
		return fmt.Errorf("releasing shim: %w", err)
	}
	goW.Close()
	// The status pipe is close-on-exec in the shim: EOF with no message
	// means the exec succeeded.
	msg, err := io.ReadAll(stR)
	if err != nil || len(msg) > 0 || ctx.Err() != nil {
		cmd.Process.Kill()
		cmd.Wait()
		switch {
		case ctx.Err() != nil:
			err = ctx.Err()
		case err == nil:
			err = errors.New(string(msg))
		}
		return fmt.Errorf("starting command: %w", err)
	}
	return nil
}

// ShimMain runs the shim side of Start when this process was started as a
// shim, and otherwise returns at once. A binary that uses Start must call
// it first thing in main (tests: in TestMain before m.Run):
//
//	func main() {
//		enforce.ShimMain()
//		...
//	}
//
// A process is a shim only when its argv[0] is the shim's name and the two
// descriptors named in argv[1] are pipes; the environment plays no part,
// so no variable can turn a command into a shim. As a shim it runs with
// Start's minimal environment, waits for Start to put it in the group and
// send the command's environment on the pipe, then execs the command in
// its own place; it never returns. It exits with 126 if Start gave up
// before releasing it, 127 if the exec failed (the error goes to Start,
// which returns it).
func ShimMain() {
	if len(os.Args) < 4 || os.Args[0] != shimArg0 {
		return
	}
	a, b, _ := strings.Cut(os.Args[1], ",")
	goFD, err1 := strconv.Atoi(a)
	stFD, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || !isPipe(goFD) || !isPipe(stFD) {
		return
	}
	syscall.CloseOnExec(goFD)
	syscall.CloseOnExec(stFD)
	payload, ok := readPayload(goFD)
	if !ok || len(payload) == 0 || (payload[0] != shimPlain && payload[0] != shimRealTime) {
		os.Exit(126)
	}
	rest := payload[1:]
	if payload[0] == shimRealTime {
		// On the thread that execs: the exec keeps its class, and the
		// command's threads inherit it.
		runtime.LockOSThread()
		var rt RealTime
		for p, b := range shimClass {
			if len(rest) > 0 && rest[0] == b {
				rt.Policy = p
			}
		}
		if rt.IsZero() {
			os.Exit(126)
		}
		a := rt.attr()
		if err := unix.SchedSetAttr(0, &a, 0); err != nil {
			syscall.Write(stFD, []byte(fmt.Sprintf("taking the real-time class %s: %v", rt, err)))
			os.Exit(127)
		}
		rest = rest[1:]
	}
	var env []string
	if len(rest) > 0 {
		env = strings.Split(strings.TrimSuffix(string(rest), "\x00"), "\x00")
	}
	err := syscall.Exec(os.Args[2], os.Args[3:], env)
	syscall.Write(stFD, []byte(fmt.Sprintf("exec %s: %v", os.Args[2], err)))
	os.Exit(127)
}

// isPipe reports whether fd is an open pipe.
func isPipe(fd int) bool {
	var st syscall.Stat_t
	return syscall.Fstat(fd, &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFIFO
}

// readPayload reads fd to EOF, at most maxShimEnv bytes.
func readPayload(fd int) ([]byte, bool) {
	var out []byte
	buf := make([]byte, 64<<10)
	for {
		n, err := syscall.Read(fd, buf)
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return nil, false
		case n == 0:
			return out, true
		}
		out = append(out, buf[:n]...)
		if len(out) > maxShimEnv {
			return nil, false
		}
	}
}
