//go:build !linux

package redistest

import "os/exec"

// startProcess starts cmd. Outside Linux there is no Pdeathsig, so a server
// outlives a test binary that dies before Main stops it.
func startProcess(cmd *exec.Cmd) error { return cmd.Start() }
