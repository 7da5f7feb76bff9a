package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// What the inspect and unlock tests share. Each test builds its primitives' states with the
// library itself, from several aqs.Clients standing for processes, on the shared redis-server,
// under a name of its own; it waits for states by reading Redis, never by sleeping.

// inspWithin bounds every wait of these tests for something that happens in well under a second.
const inspWithin = 15 * time.Second

// holderWatchdog is the watchdog timeout of the Clients whose holds the tests break: their
// renewal check, every third of it, cancels the held contexts soon after.
const holderWatchdog = 1500 * time.Millisecond

// newAdminClient returns an aqs.Client on srv with its own connection pool, closed at the end of
// the test.
func newAdminClient(t *testing.T, srv *redistest.Server, opts ...aqs.Option) *aqs.Client {
	t.Helper()
	c, err := aqs.New(t.Context(), srv.Client(t), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// stateOf reads what is at name directly, as inspect does.
func stateOf(t *testing.T, srv *redistest.Server, name string) *nameState {
	t.Helper()
	st, err := inspectName(t.Context(), srv.Client(t), "aqs", name)
	require.NoError(t, err)
	return st
}

// waitState waits until what is at name satisfies ok, and returns it.
func waitState(t *testing.T, srv *redistest.Server, name string, what string, ok func(*nameState) bool) *nameState {
	t.Helper()
	rdb := srv.Client(t)
	var st *nameState
	require.Eventually(t, func() bool {
		var err error
		st, err = inspectName(t.Context(), rdb, "aqs", name)
		return err == nil && ok(st)
	}, inspWithin, 5*time.Millisecond, "waiting for %s at %s", what, name)
	return st
}

// waitingN returns a condition: n live waiters recorded.
func waitingN(n int) func(*nameState) bool {
	return func(st *nameState) bool { return len(st.Waiters) == n }
}

// inspectJSON runs aqs inspect --json and decodes its output.
func inspectJSON(t *testing.T, srv *redistest.Server, name string) *nameState {
	t.Helper()
	code, stdout, stderr := aqsRun(t.Context(), nil, "inspect", "--redis", srv.Addr(), "--json", name)
	require.Equal(t, 0, code, "stderr:\n%s", stderr)
	var st nameState
	require.NoError(t, json.Unmarshal([]byte(stdout), &st), stdout)
	return &st
}

// inspectText runs aqs inspect and returns its output.
func inspectText(t *testing.T, srv *redistest.Server, name string) string {
	t.Helper()
	code, stdout, stderr := aqsRun(t.Context(), nil, "inspect", "--redis", srv.Addr(), name)
	require.Equal(t, 0, code, "stderr:\n%s", stderr)
	return stdout
}

// bgResult is the outcome of a blocking acquisition run in the background.
type bgResult struct {
	held context.Context
	err  error
}

// inBackground runs a blocking acquisition in the background.
func inBackground(f func() (context.Context, error)) <-chan bgResult {
	ch := make(chan bgResult, 1)
	go func() {
		held, err := f()
		ch <- bgResult{held, err}
	}()
	return ch
}

// inBackgroundErr runs a blocking call that returns only an error in the background.
func inBackgroundErr(f func() error) <-chan bgResult {
	return inBackground(func() (context.Context, error) { return nil, f() })
}

// awaitBG returns the outcome of a background acquisition.
func awaitBG(t *testing.T, ch <-chan bgResult, what string) bgResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(inspWithin):
		t.Fatalf("%s: still blocked after %v", what, inspWithin)
		return bgResult{}
	}
}

// requireBlocked checks that a background acquisition has not returned.
func requireBlocked(t *testing.T, ch <-chan bgResult, what string) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s returned (%v) but should still wait", what, r.err)
	default:
	}
}

// requireLost waits until a held context ends and checks that its cause is aqs.ErrLockLost.
func requireLost(t *testing.T, held context.Context, what string) {
	t.Helper()
	select {
	case <-held.Done():
		require.ErrorIs(t, context.Cause(held), aqs.ErrLockLost, what)
	case <-time.After(inspWithin):
		t.Fatalf("%s: the held context is still live after %v", what, inspWithin)
	}
}
