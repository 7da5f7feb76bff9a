//go:build !linux

package main

import (
	"os/exec"
	"syscall"
)

// detach does nothing outside Linux: a throwaway server stops with aqs's clean-up, and shares
// its terminal's Ctrl-C.
func detach(cmd *exec.Cmd) {}

// dieWithParent does nothing outside Linux, which has no parent-death signal.
func dieWithParent(a *syscall.SysProcAttr) {}
