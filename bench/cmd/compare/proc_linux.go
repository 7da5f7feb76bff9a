//go:build linux

package main

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill cmd's process when this one dies, so that neither the
// redis-server nor a child contender outlives a benchmark stopped with Ctrl-C. The signal is
// tied to the OS thread that forks the child: main locks the main goroutine to its thread,
// which lives as long as the process, and starts every child from it.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// selfUsage returns this process's usage so far.
func selfUsage() usage {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return usage{}
	}
	return usage{cpu: ru.Utime.Nano() + ru.Stime.Nano(), wakes: ru.Nvcsw}
}
