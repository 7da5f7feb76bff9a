//go:build unix

package main

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// canRun: aqs run runs commands here.
const canRun = true

// runSignals are the signals aqs run handles: passed on to its command, or ending the wait
// for NAME, and SIGTSTP, which it ignores (see ignoredSignal).
var runSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGTSTP}

const (
	sigTerm = syscall.SIGTERM
	sigKill = syscall.SIGKILL
)

// ignoredSignal reports whether aqs run ignores s: Ctrl-Z (SIGTSTP), since a stopped aqs run
// could renew nothing while its command, in a process group of its own, runs on. It is
// caught rather than ignored (SIG_IGN) so that the command, which would inherit SIG_IGN,
// keeps the default.
func ignoredSignal(s os.Signal) bool { return s == syscall.SIGTSTP }

// ownGroup makes the command the leader of a new process group. This is the decision on
// Ctrl-C and process groups: the command does not share aqs run's group.
//   - A stop for the hold's sake must reach every process the command started (sh -c 'a; b'
//     runs a and b as children of sh): aqs run signals the command's whole group.
//   - A Ctrl-C in the terminal signals the terminal's foreground group, which is aqs run's: aqs
//     run alone gets it, and passes it on to the command's group, so the command gets it once
//     (in one group, the terminal's SIGINT and the one passed on would both reach it).
//   - The price: the command's group is not the terminal's foreground group, so a command
//     that reads the terminal is stopped (SIGTTIN), as under timeout(1) without --foreground.
//     It reads a file or a pipe as usual.
//
// On Linux the command also gets SIGKILL should aqs run die (a parent-death signal; see
// start): a holder that can no longer renew the lease must not run on. Its own children are
// not reached by that signal.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	dieWithParent(cmd.SysProcAttr)
}

// signalGroup sends s to the command's process group.
func signalGroup(cmd *exec.Cmd, s os.Signal) error {
	sig, ok := s.(syscall.Signal)
	if !ok {
		return errors.New("not a Unix signal")
	}
	return syscall.Kill(-cmd.Process.Pid, sig)
}

// signalStatus returns the exit status that tells signal s, as shells do: 128+N.
func signalStatus(s os.Signal) int {
	if sig, ok := s.(syscall.Signal); ok {
		return 128 + int(sig)
	}
	return 128
}

// exitStatusOf returns the exit status of an exited command: its own, or 128+N for one killed
// by signal N.
func exitStatusOf(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// cannotExecute reports whether err says that the file is not one the system can run: a
// directory, or a file with no #! line or of another architecture.
func cannotExecute(err error) bool {
	return errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.ENOEXEC)
}

// signalName names s as kill -l does: SIGINT.
func signalName(s os.Signal) string {
	switch s {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGQUIT:
		return "SIGQUIT"
	case syscall.SIGTSTP:
		return "SIGTSTP"
	}
	return s.String()
}
