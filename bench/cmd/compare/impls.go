package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/reentrant"
	"github.com/redaqs/aqs/rwlock"
	"github.com/redaqs/aqs/semaphore"
)

// acquireFunc takes a lock for one goroutine, blocking until it has it or ctx is done, and
// returns the function that releases it.
type acquireFunc func(ctx context.Context) (release func() error, err error)

// impl is one implementation as one process sees it. A floor row has op: one operation of
// one goroutine, on a key of its own. A lock has locks: the acquire functions of n goroutines
// contending for the lock named key. A way to take a cart of names (carts.go) has carts: the
// cart functions of n goroutines that take their carts from pool.
type impl struct {
	name string
	// op is one operation of a floor row on key; hold is the critical section, which the
	// floor's lock cycle runs between its SET NX and its release.
	op    func(key string, hold func()) error
	per   int64 // operations one op call counts for (0: 1)
	locks func(key string, n int) ([]acquireFunc, error)
	carts func(pool []string, n int) ([]cartFunc, error)
	// manyOnly marks a row of the many-names scenarios only (the server's pipelined capacity);
	// oneOnly, a row left out of them (the FIFO floor, a hand-off on one key).
	manyOnly, oneOnly bool
	// trips, when set, counts the commands and round trips of the row's go-redis client.
	trips *tripCounter
}

// tripCounter is a go-redis hook that counts commands and the round trips that carry them
// (a lone command, or a pipeline), SUBSCRIBE-family and pub/sub traffic apart: how many calls
// the aqs Client's auto-pipeline puts into a round trip.
type tripCounter struct{ cmds, trips atomic.Int64 }

func (c *tripCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *tripCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.cmds.Add(1)
		c.trips.Add(1)
		return next(ctx, cmd)
	}
}

func (c *tripCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.cmds.Add(int64(len(cmds)))
		c.trips.Add(1)
		return next(ctx, cmds)
	}
}

// lockTTL is the lease the libraries that take one are given. It only matters if a holder
// dies, which never happens here; the libraries' defaults are close (redsync 8s, rueidislock
// 5s renewed, aqs renewed by its watchdog).
const lockTTL = 10 * time.Second

// implNames lists the implementations in the order of the table; newImpls builds them in this
// order, and a child process is told which one to run by its index.
var implNames = []string{
	"floor: PING",
	"floor: EVALSHA `return 1`",
	"floor: SET NX PX + compare-and-delete",
	"FIFO floor: BLPOP + RPUSH of a token",
	"aqs reentrant",
	"aqs fair",
	"aqs counting semaphore, 1 permit",
	"redsync (defaults)",
	"redsync, retry delay 1ms",
	"redislock, linear 100ms",
	"redislock, linear 1ms",
	"rueidislock (defaults)",
	"capacity: SET × 16 per pipeline",
	"aqs reentrant, a value per call",
	"aqs fair, a value per call",
	// The fair peers and their servers' floors (peers.go).
	"etcd floor (fsync): Txn create + compare-and-delete",
	"etcd concurrency.Mutex (fsync)",
	"etcd floor (--unsafe-no-fsync): Txn create + compare-and-delete",
	"etcd concurrency.Mutex (--unsafe-no-fsync)",
	"ZooKeeper floor: create + delete of an ephemeral node",
	"ZooKeeper lock recipe (go-zookeeper zk.Lock)",
	"aqs rwlock, write side",
	// The cart scenarios' rows (carts.go), from cartMultiRow on.
	cartImplNames[0], cartImplNames[1], cartImplNames[2], cartImplNames[3],
}

const (
	floorPing   = 0
	floorEval   = 1
	floorCycle  = 2
	fifoFloor   = 3
	capacityRow = 12
	rwlockRow   = 21
)

// capacityBatch is how many commands the capacity row sends to a round trip.
const capacityBatch = 16

// floorDel is the floor's release: delete the key only if it still holds our token. It is the
// script of internal/testkit/benchutil's floor, whose FloorCycle wants a testing.TB.
var floorDel = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)

// trivial is the EVALSHA floor's script.
var trivial = redis.NewScript(`return 1`)

// procImpls holds every implementation of one process, with the clients they own.
type procImpls struct {
	impls   []*impl
	closers []func()
	// app is the application's own Redis client, for the round trips of a critical section
	// that does I/O (sliceSpec.IO): the same for every row.
	app *redis.Client
}

// close closes every client, the aqs Clients before the go-redis clients they use.
func (p *procImpls) close() {
	for i := len(p.closers) - 1; i >= 0; i-- {
		p.closers[i]()
	}
}

// newImpls connects every implementation to the server at addr. Each family gets its own
// connection pool, with the client library's defaults, as separate applications would have.
func newImpls(ctx context.Context, addr string) (*procImpls, error) {
	p := &procImpls{}
	newRDB := func() *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: addr})
		p.closers = append(p.closers, func() { c.Close() })
		return c
	}
	fail := func(err error) (*procImpls, error) {
		p.close()
		return nil, err
	}

	p.app = newRDB()
	floor := newRDB()
	for _, s := range []*redis.Script{floorDel, trivial} {
		if err := s.Load(ctx, floor).Err(); err != nil {
			return fail(fmt.Errorf("loading the floor's scripts: %w", err))
		}
	}
	token := randomToken()
	bg := context.Background()
	p.impls = append(p.impls,
		&impl{name: implNames[floorPing], op: func(string, func()) error { return floor.Ping(bg).Err() }},
		&impl{name: implNames[floorEval], op: func(string, func()) error { return trivial.EvalSha(bg, floor, nil).Err() }},
		&impl{name: implNames[floorCycle], op: func(key string, hold func()) error {
			ok, err := floor.SetNX(bg, key, token, lockTTL).Result()
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("floor: %s is taken", key)
			}
			hold()
			return floorDel.EvalSha(bg, floor, []string{key}, token).Err()
		}},
	)

	// The FIFO floor: the cheapest strictly FIFO hand-off that Redis offers, against which a
	// FIFO lock's rate is to be read. The lock is a token in a list: a goroutine takes it with
	// BLPOP, on a connection of its own, and puts it back with RPUSH, which hands it at once
	// to the client that has blocked longest (Redis serves a key's blocked clients in the
	// order they blocked). One command per hand-off and no more: no script, no lease, no queue
	// of its own, no pub/sub. It is no usable lock (a holder that dies keeps the token for
	// ever), but no FIFO lock on Redis can beat it.
	fifo := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 64}) // a connection per waiter
	p.closers = append(p.closers, func() { fifo.Close() })
	p.impls = append(p.impls, &impl{name: implNames[fifoFloor], oneOnly: true, locks: func(key string, n int) ([]acquireFunc, error) {
		list := key + ":token"
		// The first process here puts the token in: the key is new in every slice.
		first, err := fifo.SetNX(bg, key+":init", 1, lockTTL).Result()
		if err == nil && first {
			err = fifo.RPush(bg, list, "t").Err()
		}
		if err != nil {
			return nil, err
		}
		release := func() error { return fifo.RPush(bg, list, "t").Err() }
		acq := func(ctx context.Context) (func() error, error) {
			for {
				// Blocking 50ms at most, so that the slice's end (ctx) is noticed soon; no
				// hand-off here takes nearly as long, so no waiter loses its place by it.
				// (go-redis's BLPop rounds its timeout up to a second; Redis takes decimals.)
				err := fifo.Do(bg, "BLPOP", list, "0.05").Err()
				switch {
				case err == nil:
					return release, nil
				case !errors.Is(err, redis.Nil):
					return nil, err
				case ctx.Err() != nil:
					return nil, ctx.Err()
				}
			}
		}
		return repeat(acquireFunc(acq), n), nil
	}})

	// Ours: one aqs.Client per process, as the package documentation asks.
	aqsRDB := newRDB()
	trips := &tripCounter{}
	aqsRDB.AddHook(trips)
	client, err := aqs.New(ctx, aqsRDB)
	if err != nil {
		return fail(fmt.Errorf("aqs.New: %w", err))
	}
	p.closers = append(p.closers, func() { client.Close() })
	// A Lock value is shared by the goroutines of a process, as a sync.Mutex would be.
	aqsLocks := func(lock func(context.Context) (context.Context, error), unlock func(context.Context) error, n int) []acquireFunc {
		acq := func(ctx context.Context) (func() error, error) {
			held, err := lock(ctx)
			if err != nil {
				return nil, err
			}
			return func() error { return unlock(held) }, nil
		}
		return repeat(acquireFunc(acq), n)
	}
	p.impls = append(p.impls,
		&impl{name: implNames[4], trips: trips, locks: func(key string, n int) ([]acquireFunc, error) {
			l, err := reentrant.New(client, key)
			if err != nil {
				return nil, err
			}
			return aqsLocks(func(ctx context.Context) (context.Context, error) { return l.Lock(ctx) }, l.Unlock, n), nil
		}},
		&impl{name: implNames[5], trips: trips, locks: func(key string, n int) ([]acquireFunc, error) {
			l, err := fair.New(client, key)
			if err != nil {
				return nil, err
			}
			return aqsLocks(func(ctx context.Context) (context.Context, error) { return l.Lock(ctx) }, l.Unlock, n), nil
		}},
		// A semaphore of one permit is a lock; its permits are set once per name, by the first
		// process to try.
		&impl{name: implNames[6], trips: trips, locks: semaphoreLocks(client)},
	)

	// redsync: a Mutex remembers the value of its current hold, so each goroutine has its own.
	rs := redsync.New(redsyncgoredis.NewPool(newRDB()))
	p.impls = append(p.impls,
		&impl{name: implNames[7], locks: redsyncLocks(rs)},
		// Tries enough that a Lock call never gives up within a slice (1ms apart: 17 minutes).
		&impl{name: implNames[8], locks: redsyncLocks(rs, redsync.WithRetryDelay(time.Millisecond), redsync.WithTries(1<<20))},
	)

	// redislock: without a deadline on ctx, Obtain gives up after the TTL; the slice's context
	// has none, so give it one far beyond any slice.
	rl := redislock.New(newRDB())
	redislockLocks := func(backoff time.Duration) func(string, int) ([]acquireFunc, error) {
		acq := func(key string) acquireFunc {
			return func(ctx context.Context) (func() error, error) {
				ctx, cancel := context.WithTimeout(ctx, time.Hour)
				defer cancel()
				l, err := rl.Obtain(ctx, key, lockTTL, &redislock.Options{RetryStrategy: redislock.LinearBackoff(backoff)})
				if err != nil {
					return nil, err
				}
				return func() error { return l.Release(bg) }, nil
			}
		}
		return func(key string, n int) ([]acquireFunc, error) { return repeat(acq(key), n), nil }
	}
	p.impls = append(p.impls,
		&impl{name: implNames[9], locks: redislockLocks(100 * time.Millisecond)},
		&impl{name: implNames[10], locks: redislockLocks(time.Millisecond)},
	)

	// rueidislock: one Locker per process, on its own rueidis client.
	locker, err := rueidislock.NewLocker(rueidislock.LockerOption{
		ClientOption: rueidis.ClientOption{InitAddress: []string{addr}},
	})
	if err != nil {
		return fail(fmt.Errorf("rueidislock.NewLocker: %w", err))
	}
	p.closers = append(p.closers, locker.Close)
	p.impls = append(p.impls, &impl{name: implNames[11], locks: func(key string, n int) ([]acquireFunc, error) {
		acq := func(ctx context.Context) (func() error, error) {
			_, release, err := locker.WithContext(ctx, key)
			if err != nil {
				return nil, err
			}
			return func() error { release(); return nil }, nil
		}
		return repeat(acquireFunc(acq), n), nil
	}})

	// The server's capacity for commands sent 16 to a round trip, as a client that batches
	// its calls sends them: what Redis could do for many names if the round trips were not
	// the bound. One client with a connection per goroutine, as the other rows have.
	capacity := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 64})
	p.closers = append(p.closers, func() { capacity.Close() })
	p.impls = append(p.impls, &impl{name: implNames[capacityRow], manyOnly: true, per: capacityBatch,
		op: func(key string, _ func()) error {
			_, err := capacity.Pipelined(bg, func(pipe redis.Pipeliner) error {
				for j := range capacityBatch {
					pipe.Set(bg, key+":"+strconv.Itoa(int(j)), token, lockTTL)
				}
				return nil
			})
			return err
		}})

	p.impls = append(p.impls,
		&impl{name: implNames[capacityRow+1], trips: trips, locks: func(key string, n int) ([]acquireFunc, error) {
			return perCallLocks(n, func() (func(context.Context) (context.Context, error), func(context.Context) error, error) {
				l, err := reentrant.New(client, key)
				if err != nil {
					return nil, nil, err
				}
				return func(ctx context.Context) (context.Context, error) { return l.Lock(ctx) }, l.Unlock, nil
			}), nil
		}},
		&impl{name: implNames[capacityRow+2], trips: trips, locks: func(key string, n int) ([]acquireFunc, error) {
			return perCallLocks(n, func() (func(context.Context) (context.Context, error), func(context.Context) error, error) {
				l, err := fair.New(client, key)
				if err != nil {
					return nil, nil, err
				}
				return func(ctx context.Context) (context.Context, error) { return l.Lock(ctx) }, l.Unlock, nil
			}), nil
		}},
	)

	peers, err := newPeerImpls(ctx, p)
	if err != nil {
		return fail(err)
	}
	p.impls = append(p.impls, peers...)

	// The read-write lock's write side, on one name: the same strict-FIFO hand-off as the fair
	// lock's, through the rwlock's own scripts.
	p.impls = append(p.impls, &impl{name: implNames[rwlockRow], trips: trips, oneOnly: true,
		locks: func(key string, n int) ([]acquireFunc, error) {
			l, err := rwlock.New(client, key)
			if err != nil {
				return nil, err
			}
			return aqsLocks(func(ctx context.Context) (context.Context, error) { return l.Lock(ctx) }, l.Unlock, n), nil
		}})

	// The carts' rows: aqs's on the process's Client; redislock and redsync on a go-redis
	// client of their own, whose commands are counted.
	cartRDB := newRDB()
	cartTrips := &tripCounter{}
	cartRDB.AddHook(cartTrips)
	p.impls = append(p.impls, newCartImpls(client, trips, redislock.New(cartRDB),
		redsync.New(redsyncgoredis.NewPool(cartRDB)), cartTrips)...)

	for i, im := range p.impls {
		if im.name != implNames[i] {
			panic("compare: newImpls out of step with implNames at " + im.name)
		}
	}
	return p, nil
}

func repeat[F any](f F, n int) []F {
	out := make([]F, n)
	for i := range out {
		out[i] = f
	}
	return out
}

func randomToken() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// spin busy-waits for d: the critical section's work. A sleep would hand the core to the
// scheduler and last far longer than d.
func spin(d time.Duration) {
	if d <= 0 {
		return
	}
	for start := time.Now(); time.Since(start) < d; {
	}
}

// perCallLocks returns n goroutines' acquire functions that build a Lock value for every
// acquisition with newLock, as a request handler builds it (reentrant.New(client, name) per
// request), and acquire and release through it.
func perCallLocks(n int, newLock func() (func(context.Context) (context.Context, error), func(context.Context) error, error)) []acquireFunc {
	acq := func(ctx context.Context) (func() error, error) {
		lock, unlock, err := newLock()
		if err != nil {
			return nil, err
		}
		held, err := lock(ctx)
		if err != nil {
			return nil, err
		}
		return func() error { return unlock(held) }, nil
	}
	return repeat(acquireFunc(acq), n)
}

// redsyncLocks returns redsync's acquire functions for n goroutines on key: a Mutex per
// goroutine, since a Mutex remembers the value of its current hold.
func redsyncLocks(rs *redsync.Redsync, opts ...redsync.Option) func(string, int) ([]acquireFunc, error) {
	return func(key string, n int) ([]acquireFunc, error) {
		out := make([]acquireFunc, n)
		for i := range out {
			m := rs.NewMutex(key, opts...)
			out[i] = func(ctx context.Context) (func() error, error) {
				if err := m.LockContext(ctx); err != nil {
					return nil, err
				}
				return func() error {
					ok, err := m.UnlockContext(context.Background())
					if err == nil && !ok {
						err = errors.New("redsync: unlock reported the lock not held")
					}
					return err
				}, nil
			}
		}
		return out, nil
	}
}

// semaphoreLocks returns the acquire functions of a counting semaphore of one permit on key,
// a lock: its permits are set once per name, by the first process to try.
func semaphoreLocks(client *aqs.Client) func(string, int) ([]acquireFunc, error) {
	return func(key string, n int) ([]acquireFunc, error) {
		bg := context.Background()
		s, err := semaphore.New(client, key)
		if err != nil {
			return nil, err
		}
		if _, err := s.TrySetPermits(bg, 1); err != nil {
			return nil, err
		}
		release := func() error { return s.Release(bg, 1) }
		acq := func(ctx context.Context) (func() error, error) {
			if err := s.Acquire(ctx, 1); err != nil {
				return nil, err
			}
			return release, nil
		}
		return repeat(acquireFunc(acq), n), nil
	}
}
