//go:build !unix

package main

import (
	"errors"
	"os"
	"os/exec"
)

// canRun: aqs run needs Unix process groups and signals; it refuses to run elsewhere.
const canRun = false

var runSignals = []os.Signal{os.Interrupt}

var (
	sigTerm os.Signal = os.Interrupt
	sigKill os.Signal = os.Kill
)

func ignoredSignal(os.Signal) bool { return false }

func ownGroup(*exec.Cmd) {}

func signalGroup(cmd *exec.Cmd, s os.Signal) error {
	return errors.New("not supported")
}

func signalStatus(os.Signal) int { return 130 }

func exitStatusOf(ps *os.ProcessState) int { return ps.ExitCode() }

func cannotExecute(error) bool { return false }

func signalName(s os.Signal) string { return s.String() }
