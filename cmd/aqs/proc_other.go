//go:build !linux

package main

import "os/exec"

// detach does nothing outside Linux: a throwaway server stops with aqs's clean-up, and shares
// its terminal's Ctrl-C.
func detach(cmd *exec.Cmd) {}
