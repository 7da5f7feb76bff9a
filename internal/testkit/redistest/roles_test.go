package redistest

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

type echoParams struct {
	Word string
	N    int
	D    time.Duration
}

// The test roles: echo says what it was given, then echoes the parent's lines until "end";
// fail fails; idle never reads stdin.
var (
	echoRole = RegisterRole("echo", func(env *ChildEnv, p echoParams) error {
		env.Println("params", env.Role, p.Word, p.N, p.D, env.Target.Addr, strings.Join(env.Target.Cluster, ","))
		if err := env.WaitFor("go", 10*time.Second); err != nil {
			return err
		}
		for line := range env.Lines() {
			if line == "end" {
				return nil
			}
			env.Println("echo", line)
		}
		panic("unreachable: the parent's lines end only with the process")
	})
	failRole = RegisterRole("fail", func(*ChildEnv, struct{}) error { return errors.New("the role's own reason") })
	idleRole = RegisterRole("idle", func(env *ChildEnv, _ struct{}) error {
		env.Println("ready")
		select {}
	})
)

// exitCode returns the exit status of a child that Wait returned err for.
func exitCode(t *testing.T, err error) int {
	t.Helper()
	var exit *exec.ExitError
	if err == nil {
		return 0
	}
	if !errors.As(err, &exit) {
		t.Fatalf("wait: %v", err)
	}
	return exit.ExitCode()
}

func TestRoleGetsItsParametersAndTargetAndTalksInLines(t *testing.T) {
	t.Parallel()
	p := echoParams{Word: "a word with spaces", N: 7, D: 1500 * time.Millisecond}
	for _, target := range []Target{{Addr: "127.0.0.1:1"}, {Cluster: []string{"127.0.0.1:2", "127.0.0.1:3"}}} {
		c := echoRole.Start(t, "echo", target, p)
		want := fmt.Sprintf("echo %s %d %v %s %s", p.Word, p.N, p.D, target.Addr, strings.Join(target.Cluster, ","))
		if got := c.Expect(t, "params ", 30*time.Second); got != want {
			t.Errorf("the child got %q, want %q", got, want)
		}
		c.Send(t, "go")
		c.Send(t, "one")
		c.Send(t, "two")
		c.Send(t, "end")
		for _, line := range []string{"one", "two"} {
			c.Expect(t, "echo "+line, 10*time.Second)
		}
		if err := c.Wait(t, 10*time.Second); err != nil {
			t.Fatalf("echo: %v; stderr:\n%s", err, c.stderr.String())
		}
	}
}

func TestRoleErrorExitsWithExitFailedAndTheReasonOnStderr(t *testing.T) {
	t.Parallel()
	c := failRole.Start(t, "fail", Target{}, struct{}{})
	if code := exitCode(t, c.Wait(t, 30*time.Second)); code != ExitFailed {
		t.Errorf("exit status %d, want ExitFailed (%d)", code, ExitFailed)
	}
	if s := c.stderr.String(); !strings.Contains(s, "fail (pid ") || !strings.Contains(s, "the role's own reason") {
		t.Errorf("stderr %q does not name the role and its error", s)
	}
}

func TestUnknownRoleExitsWithExitBadEnvNamingTheRegisteredOnes(t *testing.T) {
	t.Parallel()
	c := startChild(t, "unknown", childSpecEnv+`={"role":"nope","target":{},"params":{}}`)
	if code := exitCode(t, c.Wait(t, 30*time.Second)); code != ExitBadEnv {
		t.Errorf("exit status %d, want ExitBadEnv (%d)", code, ExitBadEnv)
	}
	if s := c.stderr.String(); !strings.Contains(s, `unknown role "nope"`) || !strings.Contains(s, "echo, fail, idle") {
		t.Errorf("stderr %q does not name the unknown role and the registered ones", s)
	}
}

func TestRoleParametersOfTheWrongTypeExitWithExitBadEnv(t *testing.T) {
	t.Parallel()
	c := startChild(t, "bad params", childSpecEnv+`={"role":"echo","target":{},"params":{"N":"seven"}}`)
	if code := exitCode(t, c.Wait(t, 30*time.Second)); code != ExitBadEnv {
		t.Errorf("exit status %d, want ExitBadEnv (%d)", code, ExitBadEnv)
	}
	if s := c.stderr.String(); !strings.Contains(s, `parameters of role "echo"`) {
		t.Errorf("stderr %q does not name the role whose parameters are bad", s)
	}
}

func TestChildExitsAtEOFOnStdinWhateverItsRoleDoes(t *testing.T) {
	t.Parallel()
	c := idleRole.Start(t, "idle", Target{}, struct{}{})
	c.Expect(t, "ready", 30*time.Second)
	if err := c.stdin.Close(); err != nil {
		t.Fatal(err)
	}
	if code := exitCode(t, c.Wait(t, 10*time.Second)); code != ExitParentGone {
		t.Errorf("exit status %d, want ExitParentGone (%d)", code, ExitParentGone)
	}
}

func TestRegisterRoleRefusesATakenNameAndALateRegistration(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"echo", "new"} { // registered already; after Main began
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("RegisterRole(%q) did not panic", name)
				}
			}()
			RegisterRole(name, func(*ChildEnv, struct{}) error { return nil })
		}()
	}
}
