package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/multilock"
)

// The cart scenarios: every acquisition takes several names at once, a cart of cartMin to
// cartMax names (as many of each size) drawn from a pool of names, as a shop reserves the SKUs
// of a cart. The names of a slice share one hash tag, so that on Redis Cluster they live in
// one slot and a multi-lock can take them (multilock's ErrCrossSlot); every row takes the same
// names.
//
// The rows are four ways to hold a whole cart:
//
//   - aqs multilock: one multilock.Lock built for the cart, as a request's handler builds it,
//     which waits in every name's queue at once;
//   - aqs fair, one at a time: a fair.Lock per name, shared by the process's goroutines, taken
//     in the names' sorted order, each Lock on the held context of the one before, released in
//     the reverse order;
//   - redislock and redsync, what their users write today: try each name once in sorted
//     order; on the first that is taken, release those taken, back off about cartBackoff, and
//     start again.
//
// A goroutine that is still after a cart when its call fails (a Redis error) asks for the same
// cart again: its wait runs on, as runLock counts it. The witness has a mark per name of the
// pool: a holder that finds one of its names marked is an overlap.

// The sizes of a cart, both included, and the pause of the release-all-and-retry rows after
// a failed pass (jittered, see retryPause).
const (
	cartMin     = 2
	cartMax     = 4
	cartBackoff = time.Millisecond
)

// cartFunc takes every name of a cart for one goroutine, blocking until it holds them all or
// ctx is done, and returns the function that releases them all; on failure it holds none.
// The names are sorted.
type cartFunc func(ctx context.Context, names []string) (release func() error, err error)

// The cart rows' names, in the order of their rows in implNames and in clusterImplNames.
var cartImplNames = []string{
	"aqs multilock, a value per cart",
	"aqs fair, one name at a time in sorted order",
	"redislock, sorted, release all and retry",
	"redsync, sorted, release all and retry",
}

// The cart rows in implNames: aqs multilock first, then the ways it is compared against.
const (
	cartMultiRow = rwlockRow + 1 + iota
	cartFairRow
	cartRedislockRow
	cartRedsyncRow
)

// The cart rows in clusterImplNames.
const clusterCartMultiRow = 11

// cartRows returns the index of the multi-lock's row in sc's table, and the others' indexes.
func cartRows(sc scenario) (multi int, others []int) {
	first := cartMultiRow
	if sc.cluster {
		first = clusterCartMultiRow
	}
	return first, []int{first + 1, first + 2, first + 3}
}

// cartName is name j of the pool of the slice whose keys start with key: every name of the
// pool has key as its hash tag.
func cartName(key string, j int) string { return "{" + key + "}:" + strconv.Itoa(j) }

// newCartImpls returns the cart rows, in the order of cartImplNames. The aqs rows use client,
// whose commands aqsTrips counts; redislock and redsync use rl and rs, whose client's commands
// otherTrips counts.
func newCartImpls(client *aqs.Client, aqsTrips *tripCounter, rl *redislock.Client, rs *redsync.Redsync, otherTrips *tripCounter) []*impl {
	bg := context.Background()
	multi := func(ctx context.Context, names []string) (func() error, error) {
		l, err := multilock.New(client, names)
		if err != nil {
			return nil, err
		}
		held, err := l.Lock(ctx)
		if err != nil {
			return nil, err
		}
		return func() error { return l.Unlock(held) }, nil
	}
	fairRow := func(pool []string, n int) ([]cartFunc, error) {
		locks := make(map[string]*fair.Lock, len(pool))
		for _, name := range pool {
			l, err := fair.New(client, name)
			if err != nil {
				return nil, err
			}
			locks[name] = l
		}
		take := func(ctx context.Context, names []string) (func() error, error) {
			held := make([]context.Context, 0, len(names))
			release := func() error {
				var errs error
				for i := len(held) - 1; i >= 0; i-- {
					errs = errors.Join(errs, locks[names[i]].Unlock(held[i]))
				}
				return errs
			}
			// Each on the held context of the one before: a name lost ends the waits that
			// follow it, as a caller that nests the holds would have it.
			at := ctx
			for _, name := range names {
				h, err := locks[name].Lock(at)
				if err != nil {
					return nil, errors.Join(err, release())
				}
				held, at = append(held, h), h
			}
			return release, nil
		}
		return repeat(cartFunc(take), n), nil
	}
	redislockTry := func(ctx context.Context, name string) (func() error, bool, error) {
		l, err := rl.Obtain(ctx, name, lockTTL, nil) // nil options: one try, no retry
		switch {
		case errors.Is(err, redislock.ErrNotObtained):
			return nil, false, nil
		case err != nil:
			return nil, false, err
		}
		return func() error { return l.Release(bg) }, true, nil
	}
	redsyncTry := func(ctx context.Context, name string) (func() error, bool, error) {
		m := rs.NewMutex(name)
		err := m.TryLockContext(ctx)
		var taken *redsync.ErrTaken
		switch {
		case errors.As(err, &taken) || errors.Is(err, redsync.ErrFailed):
			return nil, false, nil
		case err != nil:
			return nil, false, err
		}
		return func() error {
			ok, err := m.UnlockContext(bg)
			if err == nil && !ok {
				err = errors.New("redsync: unlock reported the lock not held")
			}
			return err
		}, true, nil
	}
	return []*impl{
		{name: cartImplNames[0], trips: aqsTrips, carts: func(_ []string, n int) ([]cartFunc, error) {
			return repeat(cartFunc(multi), n), nil
		}},
		{name: cartImplNames[1], trips: aqsTrips, carts: fairRow},
		{name: cartImplNames[2], trips: otherTrips, carts: retryCarts(redislockTry)},
		{name: cartImplNames[3], trips: otherTrips, carts: retryCarts(redsyncTry)},
	}
}

// retryCarts returns the carts of n goroutines that take their names with try, one at a time
// in sorted order, and on the first name taken by someone else release the names they took
// (in the reverse order), pause, and start again. try says whether it took the name, and
// gives the function that releases it.
func retryCarts(try func(ctx context.Context, name string) (release func() error, ok bool, err error)) func([]string, int) ([]cartFunc, error) {
	return func(_ []string, n int) ([]cartFunc, error) {
		out := make([]cartFunc, n)
		for g := range out {
			rng := rand.New(rand.NewPCG(uint64(g), uint64(time.Now().UnixNano())))
			out[g] = func(ctx context.Context, names []string) (func() error, error) {
				for {
					var taken []func() error
					releaseAll := func() error {
						var errs error
						for i := len(taken) - 1; i >= 0; i-- {
							errs = errors.Join(errs, taken[i]())
						}
						return errs
					}
					all := true
					for _, name := range names {
						release, ok, err := try(ctx, name)
						if err != nil {
							return nil, errors.Join(err, releaseAll())
						}
						if !ok {
							all = false
							break
						}
						taken = append(taken, release)
					}
					if all {
						return releaseAll, nil
					}
					if err := releaseAll(); err != nil {
						return nil, err
					}
					if err := pause(ctx, retryPause(rng)); err != nil {
						return nil, err
					}
				}
			}
		}
		return out, nil
	}
}

// retryPause is the pause of the release-all-and-retry rows after a failed pass: cartBackoff,
// jittered uniformly by ±50% so that the goroutines that collided do not retry in step.
func retryPause(rng *rand.Rand) time.Duration {
	return cartBackoff/2 + time.Duration(rng.Int64N(int64(cartBackoff)))
}

// pause sleeps for d, or until ctx is done: then it returns ctx's error.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// cartLocks returns the acquire functions of n goroutines that each take, at every call, a
// cart of the pool of names of the slice with key, through im's carts, and report its names
// to the witness while they hold them.
func cartLocks(im *impl, key string, pool, n int, wit *witness) ([]acquireFunc, error) {
	if pool < cartMax || pool > len(wit.names) {
		return nil, fmt.Errorf("a pool of %d names: the carts take up to %d, the witness watches up to %d", pool, cartMax, len(wit.names))
	}
	names := make([]string, pool)
	for j := range names {
		names[j] = cartName(key, j)
	}
	carts, err := im.carts(names, n)
	if err != nil {
		return nil, err
	}
	out := make([]acquireFunc, n)
	for g := range out {
		rng := rand.New(rand.NewPCG(uint64(g), uint64(time.Now().UnixNano())))
		var pending []int // the cart this goroutine waits for, drawn anew once it had it
		out[g] = func(ctx context.Context) (func() error, error) {
			if pending == nil {
				pending = drawCart(rng, pool)
			}
			cart := pending
			cartNames := make([]string, len(cart))
			for k, j := range cart {
				cartNames[k] = names[j]
			}
			slices.Sort(cartNames)
			release, err := carts[g](ctx, cartNames)
			if err != nil {
				return nil, err
			}
			pending = nil
			leave := wit.enterNames(cart)
			return func() error {
				leave()
				return release()
			}, nil
		}
	}
	return out, nil
}

// drawCart returns the indexes of a cart's names in a pool of that many: cartMin to cartMax
// distinct names, each size as likely, each name as likely.
func drawCart(rng *rand.Rand, pool int) []int {
	size := cartMin + rng.IntN(cartMax-cartMin+1)
	cart := make([]int, 0, size)
	for len(cart) < size {
		if j := rng.IntN(pool); !slices.Contains(cart, j) {
			cart = append(cart, j)
		}
	}
	return cart
}

// cartVersus returns, for a cart scenario's rows, the median over rounds of the multi-lock's
// rate over the fastest other row's rate in the same round, and the other row with the
// highest median rate; ok is false when either is missing.
func cartVersus(sc scenario, rows []row) (ratio float64, best int, ok bool) {
	multi, others := cartRows(sc)
	mine := rows[multi].rates
	best = -1
	for _, o := range others {
		if len(rows[o].rates) > 0 && (best < 0 || median(rows[o].rates) > median(rows[best].rates)) {
			best = o
		}
	}
	var ratios []float64
	for k := range mine {
		top := 0.0
		for _, o := range others {
			if k < len(rows[o].rates) {
				top = max(top, rows[o].rates[k])
			}
		}
		if top > 0 {
			ratios = append(ratios, mine[k]/top)
		}
	}
	if best < 0 || len(ratios) == 0 {
		return 0, 0, false
	}
	return median(ratios), best, true
}

// cartTarget is the multi-lock's goal in the cart scenarios: this many times the carts per
// second of the fastest other way, with a lower max wait than any of them.
const cartTarget = 1.5

// cartSummary says how the multi-lock of a cart scenario stands against the other ways: its
// rate against the fastest's, its max wait against theirs, and whether it meets cartTarget;
// "" when a row is missing.
func cartSummary(sc scenario, rows []row) string {
	multi, others := cartRows(sc)
	ratio, best, ok := cartVersus(sc, rows)
	if !ok {
		return ""
	}
	name := func(i int) string { return rowName(sc, i) }
	maxWait := func(i int) (time.Duration, string) {
		d, lower, ok := waitQuantile(rows[i].waits, rows[i].cut, 1)
		switch {
		case !ok:
			return 0, "—"
		case lower:
			return d, "≥ " + fmtDur(d)
		}
		return d, fmtDur(d)
	}
	mine, mineS := maxWait(multi)
	lowest, lowestS, lowestOf := time.Duration(math.MaxInt64), "", -1
	for _, o := range others {
		if len(rows[o].rates) == 0 {
			continue
		}
		if d, s := maxWait(o); s != "—" && d < lowest {
			lowest, lowestS, lowestOf = d, s, o
		}
	}
	line := fmt.Sprintf("aqs multilock %.2f× the carts per second of the fastest other way in the same round (%s has the highest median)",
		ratio, name(best))
	if lowestOf >= 0 {
		line += fmt.Sprintf("; max wait %s, against %s for %s, the lowest of the others", mineS, lowestS, name(lowestOf))
		verdict := "met"
		var missed []string
		if ratio < cartTarget {
			missed = append(missed, fmt.Sprintf("the rate by %.0f%%", 100*(1-ratio/cartTarget)))
		}
		if mine >= lowest {
			missed = append(missed, "the max wait")
		}
		if len(missed) > 0 {
			verdict = "missed: " + strings.Join(missed, " and ")
		}
		line += fmt.Sprintf(". Target, %.1f× with a lower max wait: %s", cartTarget, verdict)
	}
	return line + "."
}

// cartNotes returns what a cart scenario's table needs under it: the Redis commands each
// row's client sent per cart, and the multi-lock against the others.
func cartNotes(sc scenario, rows []row) []string {
	var notes, sent []string
	for i, r := range rows {
		if len(r.rates) == 0 || r.acquired == 0 || r.trips == 0 || isFloorRow(sc, i) {
			continue
		}
		sent = append(sent, fmt.Sprintf("%s %.1f (%.1f per round trip)", rowName(sc, i),
			float64(r.cmds)/float64(r.acquired), float64(r.cmds)/float64(r.trips)))
	}
	if len(sent) > 0 {
		notes = append(notes, "Commands the row's go-redis client sent per cart, all its traffic in the slice counted but pub/sub (aqs's "+
			"renewals and heartbeats too; the retrying rows' failed passes and their releases too): "+
			strings.Join(sent, "; ")+".")
	}
	if s := cartSummary(sc, rows); s != "" {
		notes = append(notes, s)
	}
	return notes
}
