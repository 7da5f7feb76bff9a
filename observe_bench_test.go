package aqs_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/reentrant"
)

// counter is the cheapest useful Observer: it counts the events.
type counter struct{ n atomic.Int64 }

func (c *counter) Observe(aqs.Event) { c.n.Add(1) }

// benchLocks returns two reentrant locks on one server: one through a Client without an
// observer, one through a Client with a counter.
func benchLocks(b *testing.B) (unset, set *reentrant.Lock, events *counter) {
	rdb := redistest.Single(b).Client(b)
	events = &counter{}
	newLock := func(opts ...aqs.Option) *reentrant.Lock {
		c, err := aqs.New(context.Background(), rdb, opts...)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = c.Close() })
		l, err := reentrant.New(c, redistest.Name(b)+":"+time.Now().String())
		if err != nil {
			b.Fatal(err)
		}
		cycle(b, l) // the first EVALSHA of each script
		return l
	}
	return newLock(), newLock(aqs.WithObserver(events)), events
}

func cycle(b *testing.B, l *reentrant.Lock) {
	held, err := l.Lock(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	if err := l.Unlock(held); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkObserverUncontended: an uncontended Lock and Unlock of the reentrant lock through
// a Client without an observer and through one with a counter, with their allocations.
func BenchmarkObserverUncontended(b *testing.B) {
	unset, set, _ := benchLocks(b)
	b.Run("unset", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			cycle(b, unset)
		}
	})
	b.Run("set", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			cycle(b, set)
		}
	})
}

// BenchmarkObserverVsUnset interleaves a cycle without an observer and one with a counter in
// every iteration, so that drift of a shared, noisy machine hits both alike, and reports the
// time of each and the observed cycle's as a ratio of the other's (1.0 = no cost).
func BenchmarkObserverVsUnset(b *testing.B) {
	unset, set, events := benchLocks(b)
	var without, with time.Duration
	events.n.Store(0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		cycle(b, unset)
		t1 := time.Now()
		cycle(b, set)
		with += time.Since(t1)
		without += t1.Sub(t0)
	}
	b.StopTimer()
	if events.n.Load() != 2*int64(b.N) {
		b.Fatalf("%d events for %d observed cycles", events.n.Load(), b.N)
	}
	b.ReportMetric(float64(without.Nanoseconds())/float64(b.N), "unset-ns/cycle")
	b.ReportMetric(float64(with.Nanoseconds())/float64(b.N), "set-ns/cycle")
	b.ReportMetric(float64(with)/float64(without), "set/unset")
}
