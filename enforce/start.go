package enforce

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// shimEnv carries the shim's two pipe descriptors ("GO,STATUS") from Start
// to ShimMain. ShimMain removes it before exec.
const shimEnv = "COREPIN_ENFORCE_SHIM"

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
	return start(g, cmd, "", cloneIntoCgroup())
}

// start is Start with the shim executable ("" for os.Executable) and the
// use of CLONE_INTO_CGROUP chosen by the caller (tests).
func start(g Group, cmd *exec.Cmd, shim string, cloneInto bool) error {
	if cmd.Process != nil {
		return errors.New("starting command: already started")
	}
	if cmd.Err != nil {
		return fmt.Errorf("starting command: %w", cmd.Err)
	}
	if o, ok := g.(cgroupDirOpener); ok && cloneInto {
		return startInto(o, cmd)
	}
	return startShim(g, cmd, shim)
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
	saved := cmd.SysProcAttr
	cmd.SysProcAttr = &attr
	err = cmd.Start()
	cmd.SysProcAttr = saved
	if err != nil {
		return fmt.Errorf("starting command in cgroup: %w", err)
	}
	return nil
}

func startShim(g Group, cmd *exec.Cmd, shim string) (err error) {
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
	fd := 3 + len(extra)
	cmd.Env = append(cmd.Environ(), shimEnv+"="+strconv.Itoa(fd)+","+strconv.Itoa(fd+1))
	cmd.ExtraFiles = append(extra[:len(extra):len(extra)], goR, stW)
	cmd.Path = shim
	cmd.Args = append([]string{args[0], path}, args...)
	err = cmd.Start()
	cmd.Path, cmd.Args, cmd.Env, cmd.ExtraFiles = path, args, env, extra
	goR.Close()
	stW.Close()
	if err != nil {
		return fmt.Errorf("starting shim: %w", err)
	}

	if err := g.AddProc(cmd.Process.Pid); err != nil {
		goW.Close() // the shim exits without exec
		cmd.Wait()
		return fmt.Errorf("starting command: %w", err)
	}
	if _, err := goW.Write([]byte{1}); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return fmt.Errorf("releasing shim: %w", err)
	}
	goW.Close()
	// The status pipe is close-on-exec in the shim: EOF with no message
	// means the exec succeeded.
	msg, err := io.ReadAll(stR)
	if err != nil || len(msg) > 0 {
		cmd.Wait()
		if err == nil {
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
// As a shim it waits for Start to put it in the group, then execs the
// command in its own place; it never returns. It exits with 126 if Start
// gave up before releasing it, 127 if the exec failed (the error goes to
// Start, which returns it).
func ShimMain() {
	v, ok := os.LookupEnv(shimEnv)
	if !ok {
		return
	}
	os.Unsetenv(shimEnv)
	a, b, _ := strings.Cut(v, ",")
	goFD, err1 := strconv.Atoi(a)
	stFD, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || len(os.Args) < 3 {
		fmt.Fprintf(os.Stderr, "corepin shim: bad %s=%q or arguments %q\n", shimEnv, v, os.Args)
		os.Exit(126)
	}
	syscall.CloseOnExec(goFD)
	syscall.CloseOnExec(stFD)
	var buf [1]byte
	for {
		n, err := syscall.Read(goFD, buf[:])
		if err == syscall.EINTR {
			continue
		}
		if n != 1 {
			os.Exit(126)
		}
		break
	}
	err := syscall.Exec(os.Args[1], os.Args[2:], os.Environ())
	syscall.Write(stFD, []byte(fmt.Sprintf("exec %s: %v", os.Args[1], err)))
	os.Exit(127)
}
