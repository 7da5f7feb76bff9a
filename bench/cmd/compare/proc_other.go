//go:build !linux

package main

import "os/exec"

// dieWithParent does nothing outside Linux: children are stopped at the end of a normal run,
// and exit when their stdin closes.
func dieWithParent(*exec.Cmd) {}

// selfUsage is not measured outside Linux.
func selfUsage() usage { return usage{} }
