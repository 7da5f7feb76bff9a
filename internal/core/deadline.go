package core

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// Deadlines.
//
// A blocking call of aqs returns by its context's deadline, give or take a few milliseconds of
// the engine's clean-up, also when the Redis server stalls or refuses connections. go-redis honours a
// context's deadline on the socket only when its client was made with ContextTimeoutEnabled;
// otherwise a call waits for the reply up to the client's read timeout, and retries, whatever
// the deadline. So with such a client, a call whose deadline comes before the longest go-redis
// could take runs on a goroutine of its own, and the caller stops waiting for it shortly after
// the deadline (the engine, internal/acquire, waits a moment for a reply on its way and
// settles what the call did before the call returns; a reply later than that is settled in the
// background once it comes). That goroutine costs the call a hand-over between goroutines, so
// calls run on the caller's goroutine whenever they can: a context without a deadline, a
// deadline further away than the longest go-redis could take, or a client that honours
// deadlines itself.

// blockBound returns whether rdb honours context deadlines on the socket, and otherwise the
// longest a call of it can take when the server stalls: every try (the first and its retries)
// waiting out the dial, write and read timeouts, and the backoffs between them. Unknown kinds
// of client get no bound.
func blockBound(rdb redis.UniversalClient) (honours bool, bound time.Duration) {
	var ctxTimeout bool
	var retries int
	var dial, read, write, backoff time.Duration
	switch c := rdb.(type) {
	case *redis.Client:
		o := c.Options()
		ctxTimeout, retries = o.ContextTimeoutEnabled, o.MaxRetries
		dial, read, write, backoff = o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.MaxRetryBackoff
	case *redis.ClusterClient:
		o := c.Options()
		ctxTimeout, retries = o.ContextTimeoutEnabled, o.MaxRetries
		dial, read, write, backoff = o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.MaxRetryBackoff
		retries += o.MaxRedirects
	default:
		return false, 0
	}
	if ctxTimeout {
		return true, 0
	}
	if retries < 0 {
		retries = 0
	}
	if dial <= 0 || read <= 0 || write <= 0 {
		return false, 0 // a timeout that never ends
	}
	return false, time.Duration(retries+1)*(dial+read+write) + time.Duration(retries)*max(backoff, 0)
}

// Detach reports whether a call of a blocking operation with ctx must run on a goroutine of
// its own so that the caller can return by ctx's deadline (see above).
func (rt *Runtime) Detach(ctx context.Context) bool {
	if rt.honours {
		return false
	}
	d, ok := ctx.Deadline()
	return ok && (rt.maxBlock == 0 || time.Until(d) < rt.maxBlock)
}
