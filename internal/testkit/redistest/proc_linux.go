//go:build linux

package redistest

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// Why servers die with the test binary.
//
// Main stops every server after m.Run, but a test binary can end without
// reaching that line: go test kills it on -timeout, a developer presses
// Ctrl-C, a test calls os.Exit. To keep redis-server processes from outliving
// the binary in those cases, each one is started with Pdeathsig = SIGKILL, so
// the kernel kills it when its parent dies.
//
// The kernel's "parent" here is the OS thread that forked the child, not the
// process (golang/go#27505). Go moves goroutines between threads and ends
// threads whose locked goroutine returns, so a child started from an
// arbitrary goroutine could be killed in the middle of a test. Therefore all
// servers are started by one goroutine that locks its OS thread and never
// returns: that thread lives exactly as long as the test binary. Starts are
// serialized through it, which costs nothing next to a server's start-up.

type startRequest struct {
	cmd  *exec.Cmd
	done chan error
}

var (
	starterOnce sync.Once
	starts      = make(chan startRequest)
)

// startProcess starts cmd on the starter thread with Pdeathsig set. It
// returns cmd.Start's error; on success the caller owns cmd and must Wait.
func startProcess(cmd *exec.Cmd) error {
	starterOnce.Do(func() { go starter() })
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	req := startRequest{cmd: cmd, done: make(chan error, 1)}
	starts <- req
	return <-req.done
}

// starter never unlocks its thread and never returns; see the comment above.
func starter() {
	runtime.LockOSThread()
	for req := range starts {
		req.done <- req.cmd.Start()
	}
}
