package chaos_test

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/election"
	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/multilock"
	"github.com/redaqs/aqs/reentrant"
	"github.com/redaqs/aqs/rwlock"
	"github.com/redaqs/aqs/semaphore"
)

// The seven primitives behind one interface, so that every fault runs against each of them,
// in the test process as in a child. The multi-lock is here on one fixed cart of names
// (multiNames), where it is one exclusive lock on all of them; its loads of overlapping carts
// have a test of their own (carts_test.go). The election is here as its candidates' lock: an
// acquisition is a Campaign that led, its release a Resign; its leadership's own faults (the
// leader record, observers, lost replies of its scripts) have tests of their own
// (election_test.go).

// The primitives' kinds.
const (
	kindReentrant = "reentrant"
	kindFair      = "fair"
	kindRWLock    = "rwlock"
	kindCounting  = "counting"
	kindLeased    = "leased"
	kindMulti     = "multilock"
	kindElection  = "election"
)

var allKinds = []string{kindReentrant, kindFair, kindRWLock, kindCounting, kindLeased, kindMulti, kindElection}

// Operations: what one acquisition takes.
const (
	opExclusive = "x" // the lock (reentrant, fair, multilock), the write side (rwlock), leading (election)
	opRead      = "r" // the read side (rwlock)
	// A semaphore's operation is its number of permits, "1", "2", ….
)

// exclusiveOp is the operation of a plain acquisition of kind: the lock, the write side, or
// one permit.
func exclusiveOp(kind string) string {
	if kind == kindCounting || kind == kindLeased {
		return "1"
	}
	return opExclusive
}

// prim is one primitive on one Client.
type prim struct {
	kind    string
	permits int // semaphores: the total
	key     string
	keys    []string // every key, for clean-up
	re      *reentrant.Lock
	fa      *fair.Lock
	rw      *rwlock.Lock
	cs      *semaphore.Semaphore
	ls      *semaphore.Leased
	ml      *multilock.Lock
	names   []*fair.Lock // the multi-lock's names, or the election's, each seen as its fair lock (free)
	el      *election.Election
	value   string // the election's candidates': their Client's id
}

// primConfig is what every process must agree on for one primitive.
type primConfig struct {
	kind          string
	name          string
	waiterTimeout time.Duration // fair lock, rwlock writers, semaphores, multi-lock, election
	permits       int           // semaphores
}

// newPrim returns the primitive of cfg on c. A semaphore's permits are set if they never were.
func newPrim(ctx context.Context, c *aqs.Client, cfg primConfig) (*prim, error) {
	p := &prim{kind: cfg.kind, permits: cfg.permits}
	var err error
	switch cfg.kind {
	case kindReentrant:
		if p.re, err = reentrant.New(c, cfg.name); err == nil {
			p.key, p.keys = p.re.Key(), p.re.Keys()
		}
	case kindFair:
		if p.fa, err = fair.New(c, cfg.name, fair.WithWaiterTimeout(cfg.waiterTimeout)); err == nil {
			p.key, p.keys = p.fa.Key(), p.fa.Keys()
		}
	case kindRWLock:
		if p.rw, err = rwlock.New(c, cfg.name, rwlock.WithWaiterTimeout(cfg.waiterTimeout)); err == nil {
			p.key, p.keys = p.rw.Key(), p.rw.Keys()
		}
	case kindCounting:
		if p.cs, err = semaphore.New(c, cfg.name, semaphore.WithWaiterTimeout(cfg.waiterTimeout)); err == nil {
			p.key, p.keys = p.cs.Key(), p.cs.Keys()
			_, err = p.cs.TrySetPermits(ctx, cfg.permits)
		}
	case kindLeased:
		if p.ls, err = semaphore.NewLeased(c, cfg.name, semaphore.WithWaiterTimeout(cfg.waiterTimeout)); err == nil {
			p.key, p.keys = p.ls.Key(), p.ls.Keys()
			_, err = p.ls.TrySetPermits(ctx, cfg.permits)
		}
	case kindMulti:
		if p.ml, err = multilock.New(c, multiNames(cfg.name), multilock.WithWaiterTimeout(cfg.waiterTimeout)); err == nil {
			p.key, p.keys = p.ml.Keys()[0], p.ml.Keys()
			for _, n := range p.ml.Names() {
				f, ferr := fair.New(c, n)
				if ferr != nil {
					return nil, ferr
				}
				p.names = append(p.names, f)
			}
		}
	case kindElection:
		if p.el, err = election.New(c, cfg.name, election.WithWaiterTimeout(cfg.waiterTimeout)); err == nil {
			p.key, p.keys, p.value = p.el.Keys()[0], p.el.Keys(), c.ID()
			// Whether anyone holds the election's lock, a candidate that led or one granted
			// the lock that has not led yet, is its fair lock's to say.
			p.names = make([]*fair.Lock, 1)
			p.names[0], err = fair.New(c, cfg.name)
		}
	default:
		err = fmt.Errorf("unknown kind %q", cfg.kind)
	}
	if err != nil {
		return nil, err
	}
	return p, nil
}

// multiNames is the multi-lock's cart of a primitive named name: three names in one slot,
// the first of which is the one whose queue the tests look at (prim.key).
func multiNames(name string) []string {
	tag := "{" + name + "}:"
	return []string{tag + "a", tag + "b", tag + "c"}
}

// held is one acquisition.
type held struct {
	id     string            // the leased permit's id, else ""
	permit *semaphore.Permit // the leased permit, else nil
	// ctx is the held context (the permit's, for the leased semaphore); for the counting
	// semaphore, whose permits have no lease, a context that ends only with the release.
	ctx     context.Context
	token   int64 // the fencing token (exclusive locks and the write side), else 0
	release func() error
	cancel  context.CancelFunc // the counting semaphore's ctx
}

// Release gives the acquisition back. It works with a done held context.
func (h *held) Release() error {
	err := h.release()
	if h.cancel != nil {
		h.cancel()
	}
	return err
}

// acquire blocks until op is acquired or ctx is done. Exclusive acquisitions ask for a fencing
// token. opts are for the locks and the leased semaphore.
func (p *prim) acquire(ctx context.Context, op string, opts ...aqs.LeaseOption) (*held, error) {
	background := context.WithoutCancel(ctx)
	withToken := []aqs.LockOption{aqs.WithFencingToken()}
	for _, o := range opts {
		withToken = append(withToken, o)
	}
	h := &held{}
	var err error
	switch p.kind {
	case kindReentrant, kindFair, kindMulti:
		lock := func(ctx context.Context, opts ...aqs.LockOption) (context.Context, error) {
			switch {
			case p.re != nil:
				return p.re.Lock(ctx, opts...)
			case p.ml != nil:
				return p.ml.Lock(ctx, opts...)
			}
			return p.fa.Lock(ctx, opts...)
		}
		if h.ctx, err = lock(ctx, withToken...); err != nil {
			return nil, err
		}
		h.release = func() error {
			switch {
			case p.re != nil:
				return p.re.Unlock(h.ctx)
			case p.ml != nil:
				return p.ml.Unlock(h.ctx)
			}
			return p.fa.Unlock(h.ctx)
		}
	case kindElection:
		if len(opts) > 0 {
			return nil, fmt.Errorf("an election's leadership has no fixed lease: its lease is the watchdog's")
		}
		if h.ctx, err = p.el.Campaign(ctx, p.value); err != nil {
			return nil, err
		}
		h.release = func() error { return p.el.Resign(h.ctx) }
	case kindRWLock:
		if op == opRead {
			if h.ctx, err = p.rw.RLock(ctx, opts...); err != nil {
				return nil, err
			}
			h.release = func() error { return p.rw.RUnlock(h.ctx) }
			return h, nil
		}
		if h.ctx, err = p.rw.Lock(ctx, withToken...); err != nil {
			return nil, err
		}
		h.release = func() error { return p.rw.Unlock(h.ctx) }
	case kindCounting:
		n, err := strconv.Atoi(op)
		if err != nil {
			return nil, err
		}
		if err := p.cs.Acquire(ctx, n); err != nil {
			return nil, err
		}
		h.ctx, h.cancel = context.WithCancel(background)
		h.release = func() error { return p.cs.Release(background, n) }
		return h, nil
	case kindLeased:
		n, err := strconv.Atoi(op)
		if err != nil {
			return nil, err
		}
		permit, err := p.ls.Acquire(ctx, n, opts...)
		if err != nil {
			return nil, err
		}
		h.ctx, h.id, h.permit = permit.Context(), permit.ID(), permit
		h.release = func() error { return p.ls.Release(background, permit) }
		return h, nil
	}
	// An exclusive hold: its token was assigned by the acquisition, so this is local.
	if h.token, err = aqs.FencingToken(h.ctx); err != nil {
		return nil, fmt.Errorf("token: %w (release: %v)", err, h.release())
	}
	return h, nil
}

// free reports whether nobody holds the primitive: the lock is free (each of the multi-lock's
// names), or every permit is available.
func (p *prim) free(ctx context.Context) (bool, error) {
	switch p.kind {
	case kindReentrant:
		locked, err := p.re.IsLocked(ctx)
		return !locked, err
	case kindFair:
		locked, err := p.fa.IsLocked(ctx)
		return !locked, err
	case kindRWLock:
		locked, err := p.rw.IsLocked(ctx)
		return !locked, err
	case kindCounting:
		n, err := p.cs.Available(ctx)
		return n == p.permits, err
	case kindMulti, kindElection:
		for _, f := range p.names {
			if locked, err := f.IsLocked(ctx); err != nil || locked {
				return false, err
			}
		}
		return true, nil
	default:
		n, err := p.ls.Available(ctx)
		return n == p.permits, err
	}
}
