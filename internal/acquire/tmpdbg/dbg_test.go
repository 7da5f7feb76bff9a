package tmpdbg

import (
	"context"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/redistest"
	"github.com/redaqs/aqs/reentrant"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

type locker interface {
	Lock(ctx context.Context, opts ...aqs.LockOption) (context.Context, error)
	Unlock(ctx context.Context) error
}

func run(t *testing.T, mk func(c *aqs.Client, name string) locker) {
	srv := redistest.Single(t)
	rdb := srv.Client(t)
	name := redistest.Name(t)
	var locks []locker
	for i := 0; i < 4; i++ {
		c, err := aqs.New(context.Background(), srv.Client(t))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		locks = append(locks, mk(c, name))
	}
	var n, bad atomic.Int64
	var maxWait atomic.Int64
	stop := time.Now().Add(3 * time.Second)
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(stop) {
					st := time.Now()
					h, err := locks[i].Lock(context.Background())
					if err != nil {
						t.Error(err)
						return
					}
					if w := time.Since(st); int64(w) > maxWait.Load() {
						maxWait.Store(int64(w))
					}
					v, _ := rdb.Get(h, name+":x").Int()
					rdb.Set(h, name+":x", v+1, 0)
					if h.Err() != nil {
						bad.Add(1)
						t.Logf("held ctx ended: %v", context.Cause(h))
					}
					if err := locks[i].Unlock(h); err != nil {
						t.Error(err)
					}
					n.Add(1)
				}
			}()
		}
	}
	wg.Wait()
	t.Logf("%d acquisitions, %d bad, max wait %v", n.Load(), bad.Load(), time.Duration(maxWait.Load()))
}

func TestFair(t *testing.T) {
	run(t, func(c *aqs.Client, name string) locker { l, _ := fair.New(c, name); return l })
}
func TestReentrant(t *testing.T) {
	run(t, func(c *aqs.Client, name string) locker { l, _ := reentrant.New(c, name); return l })
}
