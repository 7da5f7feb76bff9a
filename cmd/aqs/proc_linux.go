//go:build linux

package main

import (
	"os/exec"
	"syscall"
)

// detach gives a throwaway server its own process group and a parent-death signal; see "A
// throwaway server" in redis.go.
func detach(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// dieWithParent gives a child SIGKILL when the thread that started it ends (see start in
// run.go).
func dieWithParent(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
