package redistest

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Roles of child processes.
//
// A test that needs more than one OS process, to see a lock hold across processes or survive
// a kill -9, runs its own test binary again as a child in a role: what the child does. The
// role's code belongs to the package whose tests use it; the plumbing is here, the same for
// every package:
//
//   - Registering. A package's tests register each role once, at package initialization, with
//     RegisterRole in a package-level var; the name must be unique in the test binary. A
//     second registration of a name, or one after Main has begun, panics: a child would not
//     find a role registered later.
//   - Choosing. Role.Start runs the test binary again with one environment variable,
//     AQS_TEST_CHILD, holding the child's spec in JSON: the role's name, the Target (where
//     Redis is) and the role's parameters. The package's TestMain hands over to Main as
//     always; Main sees the variable and runs the role instead of the tests, so a child never
//     starts a redis-server, never runs a test and never runs the leak check.
//   - Parameters. The parent's value of the role's parameter type P is encoded in JSON and
//     decoded into a new P in the child, so parent and child agree on them by type, not by
//     variable names. The child connects with ChildEnv.Redis or ChildEnv.Client.
//   - Reporting. The child talks to the parent in lines: it prints them on stdout
//     (ChildEnv.Println, Child.Expect on the parent's side) and reads the parent's on stdin
//     (Child.Send, ChildEnv.Lines and ChildEnv.WaitFor); the words are each package's, and
//     each package's role docs state them. It ends with an exit status: ExitOK when the role
//     returned nil; ExitFailed when it returned an error, which is written to stderr, and
//     the parent logs a child's stderr when the test fails; ExitParentGone when stdin reached
//     EOF first (see below).
//   - Failing to choose. A spec that cannot be decoded, a role this binary does not register,
//     or parameters that do not decode into its P end the child with ExitBadEnv before the
//     role runs, and stderr names the cause and, for an unknown role, the registered ones.
//     Role.Start never sends those, since parent and child register the same roles.
//
// A child exits as soon as its stdin reaches EOF, holding whatever it holds, as a crash
// would: Main reads stdin from the start, whatever the role does. The parent closes the pipe
// in t.Cleanup, and the kernel closes it when the parent dies, so no child outlives the test
// binary, whatever the platform: Pdeathsig, which keeps the servers from outliving it
// (proc_linux.go), is Linux-only and tied to the forking thread.

// childSpecEnv names the environment variable that makes this test binary a child.
const childSpecEnv = "AQS_TEST_CHILD"

// childSpec is what Role.Start tells a child.
type childSpec struct {
	Role   string          `json:"role"`
	Target Target          `json:"target"`
	Params json.RawMessage `json:"params"`
}

// roles is the registry of this test binary.
var roles = struct {
	sync.Mutex
	byName map[string]func(params json.RawMessage) (func(*ChildEnv) error, error)
	sealed bool // Main has begun: nothing may be registered any more
}{byName: map[string]func(json.RawMessage) (func(*ChildEnv) error, error){}}

// Role is a role registered with RegisterRole, whose parameters are a P.
type Role[P any] struct{ name string }

// RegisterRole registers the role name of this test binary's child processes, which run
// run(env, p) with the parameters p that the parent passed to Start, and returns the Role
// to start them with. Call it at package initialization, in a package-level var: it panics
// when name is empty or registered already, or when Main has begun.
func RegisterRole[P any](name string, run func(env *ChildEnv, p P) error) Role[P] {
	roles.Lock()
	defer roles.Unlock()
	switch _, dup := roles.byName[name]; {
	case name == "":
		panic("redistest: RegisterRole with an empty name")
	case dup:
		panic(fmt.Sprintf("redistest: role %q registered twice", name))
	case roles.sealed:
		panic(fmt.Sprintf("redistest: role %q registered after Main began; register roles in a package-level var", name))
	}
	roles.byName[name] = func(raw json.RawMessage) (func(*ChildEnv) error, error) {
		var p P
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, fmt.Errorf("parameters of role %q: %w", name, err)
		}
		return func(env *ChildEnv) error { return run(env, p) }, nil
	}
	return Role[P]{name}
}

// Name returns the role's name.
func (r Role[P]) Name() string { return r.name }

// Start runs this test binary again as a child process in role r, with Redis at target and
// the parameters p, and returns it; the child is killed in t.Cleanup at the latest. label
// names the child in failure messages; its stderr is logged when the test fails, since that
// is where a child says why it failed.
func (r Role[P]) Start(t testing.TB, label string, target Target, p P) *Child {
	t.Helper()
	if r.name == "" {
		t.Fatalf("redistest: %s: Start of a Role that RegisterRole did not return", label)
	}
	params, err := json.Marshal(p)
	if err != nil {
		t.Fatalf("redistest: %s: parameters of role %q: %v", label, r.name, err)
	}
	spec, err := json.Marshal(childSpec{Role: r.name, Target: target, Params: params})
	if err != nil {
		t.Fatalf("redistest: %s: spec of role %q: %v", label, r.name, err)
	}
	return startChild(t, label, childSpecEnv+"="+string(spec))
}

// sealRoles ends the registration: Main has begun.
func sealRoles() {
	roles.Lock()
	defer roles.Unlock()
	roles.sealed = true
}

// lookupRole returns how to start the role of spec's name with its parameters.
func lookupRole(spec childSpec) (func(*ChildEnv) error, error) {
	roles.Lock()
	decode, ok := roles.byName[spec.Role]
	names := slices.Sorted(maps.Keys(roles.byName))
	roles.Unlock()
	if !ok {
		return nil, fmt.Errorf("unknown role %q; this test binary registers: %s", spec.Role, strings.Join(names, ", "))
	}
	return decode(spec.Params)
}

// Target is where a child's Redis is: a single node, a cluster, or a Sentinel group, the
// first that is set.
type Target struct {
	Addr      string   `json:"addr,omitempty"`      // a single node, "host:port"
	Cluster   []string `json:"cluster,omitempty"`   // a cluster's seed nodes
	Sentinels []string `json:"sentinels,omitempty"` // the sentinels of SentinelMasterName
}

// TargetOf returns the Target that rdb connects to: a *redis.Client of one node (not a
// Sentinel one: write Target{Sentinels: …} for that) or a *redis.ClusterClient.
func TargetOf(t testing.TB, rdb redis.UniversalClient) Target {
	t.Helper()
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		return Target{Cluster: c.Options().Addrs}
	case *redis.Client:
		if addr := c.Options().Addr; addr != "FailoverClient" { // go-redis's name for a Sentinel client
			return Target{Addr: addr}
		}
	}
	t.Fatalf("redistest: TargetOf: a %T is not a single node's nor a cluster's client", rdb)
	return Target{}
}

// client returns a new client of the target.
func (tg Target) client() (redis.UniversalClient, error) {
	switch {
	case tg.Addr != "":
		return redis.NewClient(&redis.Options{Addr: tg.Addr}), nil
	case len(tg.Cluster) > 0:
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: tg.Cluster}), nil
	case len(tg.Sentinels) > 0:
		return redis.NewFailoverClient(&redis.FailoverOptions{MasterName: SentinelMasterName,
			SentinelAddrs: tg.Sentinels}), nil
	}
	return nil, fmt.Errorf("the target names no Redis")
}
