package fair_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redaqs/aqs/internal/testkit/benchutil"
	"github.com/redaqs/aqs/internal/testkit/condtest"
	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// BenchmarkConditionVsHandOff compares a Condition's exchange with the fair lock's hand-off,
// both between two goroutines on two Clients (so that every grant is published, as across
// processes), in interleaved rounds of benchutil.Span each.
//
// An exchange: the goroutine whose turn it is passes the turn, Signals (the other goes from
// the condition onto the lock's queue) and Waits (its release hands the lock to the other and
// puts it on the condition, in one script); the other's Wait returns. A hand-off: two
// goroutines loop Lock, Unlock on the lock, and each acquisition is the other's release's
// hand-off. It reports the time of an exchange over the time of a hand-off (medians of the
// rounds), and the commands per exchange and per hand-off.
func BenchmarkConditionVsHandOff(b *testing.B) {
	rdb := redistest.Single(b).Client(b)
	cnt := &benchutil.Counter{}
	rdb.AddHook(cnt)
	ctx := context.Background()
	ls, cs := condtest.Locks(b, condKind, rdb, 2)
	locks := []condtest.Lock{ls[0], ls[1]}
	conds := []condtest.Cond{cs[0], cs[1]}

	exchanges := func(span time.Duration) (int64, time.Duration) {
		var turn atomic.Int32
		var done atomic.Bool
		var n atomic.Int64
		stop := time.Now().Add(span)
		start := time.Now()
		var wg sync.WaitGroup
		for g := range 2 {
			wg.Go(func() {
				l, c := locks[g], conds[g]
				held, err := l.Lock(ctx)
				if err != nil {
					b.Error(err)
					return
				}
				for {
					for turn.Load() != int32(g) && !done.Load() {
						if held, err = c.Wait(held); err != nil {
							b.Error(err)
							return
						}
					}
					if done.Load() {
						_ = l.Unlock(held)
						return
					}
					n.Add(1)
					if time.Now().After(stop) {
						done.Store(true)
					} else {
						turn.Store(int32(1 - g))
					}
					if _, err := c.Signal(ctx); err != nil {
						b.Error(err)
						return
					}
					if done.Load() {
						_ = l.Unlock(held)
						return
					}
					if held, err = c.Wait(held); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		return n.Load(), time.Since(start)
	}
	handOffs := func(span time.Duration) (int64, time.Duration) {
		return benchutil.Run(2, span, func(g int) {
			h, err := locks[g].Lock(ctx)
			if err != nil {
				b.Error(err)
				return
			}
			if err := locks[g].Unlock(h); err != nil {
				b.Error(err)
			}
		})
	}
	exchanges(100 * time.Millisecond) // subscribes both Clients
	var ratios, cmdsX, cmdsH []float64
	b.ResetTimer()
	for range b.N {
		for range 3 {
			c0 := cnt.Cmds.Load()
			nx, dx := exchanges(benchutil.Span / 2)
			c1 := cnt.Cmds.Load()
			nh, dh := handOffs(benchutil.Span / 2)
			c2 := cnt.Cmds.Load()
			if nx == 0 || nh == 0 {
				b.Fatal("no exchange or no hand-off in a round")
			}
			ratios = append(ratios, (float64(dx)/float64(nx))/(float64(dh)/float64(nh)))
			cmdsX = append(cmdsX, float64(c1-c0)/float64(nx))
			cmdsH = append(cmdsH, float64(c2-c1)/float64(nh))
		}
	}
	b.ReportMetric(median(ratios), "exchange/hand-off")
	b.ReportMetric(median(cmdsX), "cmds/exchange")
	b.ReportMetric(median(cmdsH), "cmds/hand-off")
}
