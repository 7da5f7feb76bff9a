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
