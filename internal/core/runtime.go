// Package core is the runtime that every aqs primitive shares: hold identity, the script
// loader, the pub/sub hub, the lease watchdog and the bookkeeping of held locks. The root
// package aqs wraps it as Client; the primitives reach it through Client.Runtime, which takes
// an Access.
package core

import (
	"github.com/redaqs/aqs/internal/layout"

	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs/internal/scripts"
)

// Config is the Client's configuration after its options were applied.
type Config struct {
	WatchdogTimeout time.Duration
	Prefix          string
	Logger          *slog.Logger
	// LoggerSet tells whether the user gave Logger (aqs.WithLogger). New's warning about an
	// evicting server goes to slog.Default() otherwise, since a warning that nobody reads
	// would not be one.
	LoggerSet bool
	// Linger is how long the hub stays subscribed to a channel after its last local waiter
	// left, so that a lock contended in bursts does not subscribe and unsubscribe every cycle.
	Linger time.Duration
	// SyncReplicas and SyncTimeout are the replica-sync policy (see sync.go): every
	// acquisition waits for SyncReplicas replicas to acknowledge it within SyncTimeout.
	// SyncReplicas 0 turns it off.
	SyncReplicas int
	SyncTimeout  time.Duration
	// Observe receives the Client's events (see observe.go); nil: none are made.
	Observe func(Event)
}

// DefaultConfig returns the defaults documented on the options.
func DefaultConfig() Config {
	return Config{
		WatchdogTimeout: 30 * time.Second,
		Prefix:          "aqs",
		Logger:          slog.New(slog.DiscardHandler),
		Linger:          2 * time.Second,
	}
}

// Runtime is one Client's shared machinery.
type Runtime struct {
	Redis   redis.UniversalClient
	Cfg     Config
	ID      string
	Sharded bool // Redis Cluster: sharded pub/sub (SSUBSCRIBE/SPUBLISH)
	Hub     *Hub
	// Pipe sends the primitives' calls, pipelining those of concurrent calls (see pipe.go).
	Pipe *Pipe

	seq atomic.Uint64

	closeOnce sync.Once
	closed    chan struct{}
	ctx       context.Context // cancelled by Close; bounds the runtime's own calls
	cancel    context.CancelFunc

	holdsMu sync.Mutex
	holds   map[holdKey]*Hold
	dogWake chan struct{}
	dogNext atomic.Int64 // unix nanos of the watchdog's next wake-up
	dogDone chan struct{}
	heart   *heart

	bgMu     sync.Mutex
	bg       sync.WaitGroup // background clean-ups; Close waits for them
	deferred atomic.Int64   // see Deferred

	liveMu sync.Mutex
	live   map[uint64]int // hold ids in use, by sequence number: their uses (see orphan.go)

	watchMu sync.Mutex
	watches map[int]*replicaWatch // by slot (0 off Redis Cluster): see sync_watch.go

	honours  bool          // Redis honours context deadlines itself (see deadline.go)
	maxBlock time.Duration // otherwise: the longest a call can take; 0: no bound

	// Queues holds the engine's local state of each primitive this Client uses, by name and
	// configuration, for every value of it to share (see internal/acquire/shared.go).
	Queues sync.Map
}

// Defer counts a call that returns with a clean-up of its own still to run (see Deferred).
func (rt *Runtime) Defer() { rt.deferred.Add(1) }

// Deferred returns how many calls of this Client returned with a clean-up of their own still to
// run: in the background (a round trip abandoned at the deadline, a give-up that failed or took
// longer than the engine waits), or by a release on its way that decided about the call as it
// left. Until that clean-up runs, what such a call queued, took or was granted stays in Redis
// although the call reported failure. Every call counts before it returns, so a failed call
// during which the count did not change left nothing behind: the linearizability tests
// (internal/testkit/lintest) rely on that.
func (rt *Runtime) Deferred() int64 { return rt.deferred.Load() }

// Go runs f in the background with the runtime's context (cancelled by Close, which waits for
// f to return), and reports whether it did: not after Close.
func (rt *Runtime) Go(f func(ctx context.Context)) bool {
	rt.bgMu.Lock()
	defer rt.bgMu.Unlock()
	if rt.Check() != nil {
		return false // closed: the clean-up would fail anyway, and Close may be waiting already
	}
	rt.bg.Add(1)
	go func() {
		defer rt.bg.Done()
		f(rt.ctx)
	}()
	return true
}

// RuntimeOf returns the runtime of an *aqs.Client, nil for a nil Client: package aqs sets it
// at init. The primitives' packages reach the runtime they share through it; code outside the
// module cannot, since this package is internal.
var RuntimeOf func(client any) *Runtime

// NewRuntime validates cfg, preloads every script on every master and starts the watchdog.
// On error nothing is left running.
func NewRuntime(ctx context.Context, rdb redis.UniversalClient, cfg Config) (*Runtime, error) {
	if rdb == nil {
		return nil, Invalid("nil redis client")
	}
	if err := ValidPrefix(cfg.Prefix); err != nil {
		return nil, err
	}
	if cfg.WatchdogTimeout < 30*time.Millisecond {
		return nil, Invalid("watchdog timeout %v is below 30ms", cfg.WatchdogTimeout)
	}
	if cfg.Logger == nil {
		return nil, Invalid("nil logger")
	}
	if cfg.SyncReplicas < 0 || cfg.SyncReplicas > 0 && cfg.SyncTimeout < time.Millisecond {
		return nil, Invalid("replica sync of %d replicas within %v", cfg.SyncReplicas, cfg.SyncTimeout)
	}
	if err := scripts.Load(ctx, rdb); err != nil {
		return nil, fmt.Errorf("aqs: preload scripts: %w", err)
	}
	if err := checkSync(ctx, rdb, cfg); err != nil {
		return nil, err
	}
	warn := cfg.Logger
	if !cfg.LoggerSet {
		warn = slog.Default()
	}
	warnEviction(ctx, rdb, warn)
	_, sharded := rdb.(*redis.ClusterClient)
	rctx, cancel := context.WithCancel(context.Background())
	rt := &Runtime{
		Redis:   rdb,
		Cfg:     cfg,
		ID:      uuid.NewString(),
		Sharded: sharded,
		closed:  make(chan struct{}),
		ctx:     rctx,
		cancel:  cancel,
		holds:   make(map[holdKey]*Hold),
		dogWake: make(chan struct{}, 1),
		dogDone: make(chan struct{}),
	}
	rt.honours, rt.maxBlock = blockBound(rdb)
	rt.Pipe = newPipe(rdb, rt.honours, rt.maxBlock)
	rt.Hub = newHub(rt)
	rt.heart = newHeart()
	go rt.watchdog()
	go rt.beat()
	return rt, nil
}

// Close stops the watchdog and every subscription, and cancels every held context with a
// cause matching both ErrLockLost and ErrClosed: the leases are no longer renewed, so they can
// no longer be trusted. Held locks are not deleted; they expire. Close is idempotent.
func (rt *Runtime) Close() error {
	rt.closeOnce.Do(func() {
		close(rt.closed)
		rt.cancel()
		<-rt.dogDone
		<-rt.heart.done
		rt.Hub.close()
		// A barrier, not a critical section: taking bgMu waits for every Go that saw the runtime
		// open to have added itself to bg, and no Go after this point sees it open.
		rt.bgMu.Lock()
		//lint:ignore SA2001 the empty critical section is the barrier
		rt.bgMu.Unlock()
		rt.bg.Wait()
		cause := fmt.Errorf("%w: %w", ErrLockLost, ErrClosed)
		rt.holdsMu.Lock()
		holds := make([]*Hold, 0, len(rt.holds))
		for _, h := range rt.holds {
			holds = append(holds, h)
		}
		rt.holdsMu.Unlock()
		for _, h := range holds {
			h.lose(cause)
		}
	})
	return nil
}

// Done is closed by Close.
func (rt *Runtime) Done() <-chan struct{} { return rt.closed }

// Check returns ErrClosed after Close.
func (rt *Runtime) Check() error {
	select {
	case <-rt.closed:
		return ErrClosed
	default:
		return nil
	}
}

// NewHoldID returns a fresh hold id: the client id and a sequence number. Hold ids are never
// reused, so no call can ever act on another hold than its own.
func (rt *Runtime) NewHoldID() string {
	return layout.HoldID(rt.ID, rt.seq.Add(1))
}

// PublishCommand is the command scripts use to notify waiters: SPUBLISH on Redis Cluster (the
// message goes to the slot's shard only), PUBLISH elsewhere.
func (rt *Runtime) PublishCommand() any {
	if rt.Sharded {
		return spublish
	}
	return publish
}

// The publish commands as script arguments, boxed once (a string put into an interface value
// is copied to the heap each time).
var publish, spublish any = "PUBLISH", "SPUBLISH"

// Key returns the base key of a primitive's name under this Client's prefix.
func (rt *Runtime) Key(name string) (string, error) { return BaseKey(rt.Cfg.Prefix, name) }

// Logger is the Client's logger.
func (rt *Runtime) Logger() *slog.Logger { return rt.Cfg.Logger }
