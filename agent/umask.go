package agent

import "syscall"

// syscallUmask sets the process umask and returns the old one. The umask is
// process-wide: ListenUnix holds it only around one bind.
func syscallUmask(m int) int { return syscall.Umask(m) }
