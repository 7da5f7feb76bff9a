package scripts_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs/internal/scripts"
	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// A release whose reply was lost may run twice. A leased semaphore's partial release leaves
// the permit live, so a second run alone would give back as many permits again: with the key
// of the call's own, in every shape of the script (the fast paths written out before any
// definition, and the general one), the second run answers with the reply of the first and
// changes nothing. A reply that names a waiter of the caller's Client (a grant) matters: the
// caller tells that waiter.
func TestPartialReleaseRunTwiceAnswersAsItsFirstRunAndChangesNothing(t *testing.T) {
	const lease, timeout = 60000, 60000
	type release struct {
		script *scripts.Script
		keys   []string
		args   []any
	}
	for _, tc := range []struct {
		name string
		// setup builds the state at base, the primitive's base key, with holds of the
		// caller's Client (me) and of another (other), and returns the release.
		setup func(t *testing.T, rdb redis.UniversalClient, base, me, other string) release
	}{
		{"leased permit, part of it", func(t *testing.T, rdb redis.UniversalClient, base, me, other string) release {
			run(t, rdb, scripts.SemSet, lsemKeys(base), "set", 3, "PUBLISH", me, "l")
			run(t, rdb, scripts.LSemAcquire, lsemKeys(base), me+":1", 2, lease, timeout, "1", "PUBLISH", "0")
			return release{scripts.LSemRelease, lsemKeys(base), []any{me + ":1", 1, "PUBLISH", me}}
		}},
		{"leased permit, part of it granted to a queued waiter of the Client", func(t *testing.T, rdb redis.UniversalClient, base, me, other string) release {
			run(t, rdb, scripts.SemSet, lsemKeys(base), "set", 2, "PUBLISH", me, "l")
			run(t, rdb, scripts.LSemAcquire, lsemKeys(base), me+":1", 2, lease, timeout, "1", "PUBLISH", "0")
			run(t, rdb, scripts.LSemAcquire, lsemKeys(base), me+":2", 1, lease, timeout, "1", "PUBLISH", "0")
			return release{scripts.LSemRelease, lsemKeys(base), []any{me + ":1", 1, "PUBLISH", me}}
		}},
		{"leased permit, with the general serving", func(t *testing.T, rdb redis.UniversalClient, base, me, other string) release {
			run(t, rdb, scripts.SemSet, lsemKeys(base), "set", 2, "PUBLISH", me, "l")
			run(t, rdb, scripts.LSemAcquire, lsemKeys(base), me+":1", 2, lease, timeout, "1", "PUBLISH", "0")
			run(t, rdb, scripts.LSemAcquire, lsemKeys(base), other+":1", 1, lease, timeout, "1", "PUBLISH", "0")
			return release{scripts.LSemRelease, lsemKeys(base), []any{me + ":1", 1, "PUBLISH", me}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			rdb := redistest.Single(t).Client(t)
			base := "aqs:{" + redistest.Name(t) + "}"
			me, other := uuid.NewString(), uuid.NewString()
			r := tc.setup(t, rdb, base, me, other)
			once := base + ":x:" + me + ":release"
			keys := append(r.keys[:len(r.keys):len(r.keys)], once)
			defer rdb.Del(ctx, append(keys, base+":g")...)

			first, err := r.script.Run(ctx, rdb, keys, r.args...).Result()
			require.NoError(t, err)
			t.Logf("the first run's reply: %v", first)
			after := dump(t, rdb, r.keys)
			second, err := r.script.Run(ctx, rdb, keys, r.args...).Result()
			require.NoError(t, err)
			assert.Equal(t, first, second, "the second run's reply")
			assert.Equal(t, after, dump(t, rdb, r.keys), "the keys after the second run")
			ttl, err := rdb.PTTL(ctx, once).Result()
			require.NoError(t, err)
			assert.Positive(t, ttl, "the key of the call's own expires")

			// Without the key of the call's own, a second run finds the hold gone.
			again, err := r.script.Run(ctx, rdb, r.keys, r.args...).Result()
			require.NoError(t, err)
			assert.NotEqual(t, first, again, "a run without the key")
		})
	}
}

// run runs a script that sets a test up, which must succeed.
func run(t *testing.T, rdb redis.UniversalClient, s *scripts.Script, keys []string, args ...any) {
	t.Helper()
	require.NoError(t, s.Run(context.Background(), rdb, keys, args...).Err(), "setting up")
}

func lsemKeys(base string) []string {
	return []string{base, base + ":q", base + ":d", base + ":p", base + ":pn"}
}

// dump returns the serialized values of keys (absent ones as "").
func dump(t *testing.T, rdb redis.UniversalClient, keys []string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, k := range keys {
		v, err := rdb.Dump(context.Background(), k).Result()
		if err != redis.Nil {
			require.NoError(t, err)
		}
		m[k] = v
	}
	return m
}
