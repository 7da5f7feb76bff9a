package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/testkit/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

func TestDrawCartTakesTwoToFourDistinctNamesOfThePool(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	sizes := map[int]int{}
	for range 3000 {
		cart := drawCart(rng, 5)
		sizes[len(cart)]++
		for k, j := range cart {
			if j < 0 || j >= 5 {
				t.Fatalf("cart %v: name %d is not in a pool of 5", cart, j)
			}
			if slices.Contains(cart[:k], j) {
				t.Fatalf("cart %v: name %d twice", cart, j)
			}
		}
	}
	for size := cartMin; size <= cartMax; size++ {
		// Each size a third of the time: 1000 expected, far more than 800 but for a broken draw.
		if sizes[size] < 800 {
			t.Errorf("carts of %d names: %d in 3000 draws", size, sizes[size])
		}
	}
	if len(sizes) != cartMax-cartMin+1 {
		t.Errorf("cart sizes drawn: %v, want %d to %d", sizes, cartMin, cartMax)
	}
}

func TestEnterNamesCountsAnOverlapPerNameHeldTwice(t *testing.T) {
	w := newLocalWitness()
	leaveA := w.enterNames([]int{1, 2, 3})
	leaveB := w.enterNames([]int{3, 4, 2})
	if got := w.overlaps.Load(); got != 2 {
		t.Fatalf("carts {1,2,3} and {3,4,2} held at once: %d overlaps, want 2 (names 2 and 3)", got)
	}
	leaveB() // clears 4 only: 2 and 3 are A's
	if w.enterNames([]int{2})(); w.overlaps.Load() != 3 {
		t.Fatalf("name 2 entered while A holds it: %d overlaps, want 3", w.overlaps.Load())
	}
	leaveA()
	w.enterNames([]int{1, 2, 3, 4})()
	if got := w.overlaps.Load(); got != 3 {
		t.Fatalf("after every holder left, a cart of all four names counted %d overlaps, want none more than 3", got)
	}
}

func TestSharedWitnessMarksNamesAcrossMappings(t *testing.T) {
	a, path, err := createSharedWitness()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.unmap() })
	b, err := mapWitness(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.unmap() })
	leave := a.enterNames([]int{0, witnessNames - 1})
	b.enterNames([]int{witnessNames - 1})()
	leave()
	b.enterNames([]int{0, witnessNames - 1})()
	if got := a.overlaps.Load(); got != 1 {
		t.Fatalf("one name held in two mappings at once: %d overlaps, want 1", got)
	}
}

func TestOnlyTheCartRowsAndTheFloorRunInACartScenario(t *testing.T) {
	carts := scenario{tag: "carts-100", cart: true, names: 100, procs: 4, goroutines: 8}
	many := scenario{tag: "many", names: 1000, procs: 1, goroutines: 64}
	hot := scenario{tag: "8", procs: 1, goroutines: 8}
	cart := &impl{carts: func([]string, int) ([]cartFunc, error) { return nil, nil }}
	lock := &impl{locks: func(string, int) ([]acquireFunc, error) { return nil, nil }}
	oneOnly := &impl{locks: lock.locks, oneOnly: true}
	floor := &impl{op: func(string, func()) error { return nil }}
	for _, c := range []struct {
		sc    scenario
		im    *impl
		floor bool
		want  bool
	}{
		{carts, cart, false, true}, {carts, lock, false, false}, {carts, oneOnly, false, false},
		{carts, floor, true, true}, {carts, floor, false, false},
		{many, cart, false, false}, {hot, cart, false, false},
		{many, lock, false, true}, {many, oneOnly, false, false}, {hot, oneOnly, false, true},
	} {
		if got := runsIn(c.sc, c.im, c.floor); got != c.want {
			t.Errorf("scenario %s, carts %t, locks %t, floor %t: runs %t, want %t",
				c.sc.tag, c.im.carts != nil, c.im.locks != nil, c.floor, got, c.want)
		}
	}
}

func TestCartSummaryWeighsTheMultiLockAgainstTheFastestOtherRowRoundByRound(t *testing.T) {
	sc := scenario{tag: "carts-100", cart: true, names: 100, procs: 4, goroutines: 8}
	ms := int64(time.Millisecond)
	rows := make([]row, len(implNames))
	rows[cartMultiRow] = row{rates: []float64{3000, 3000, 3000}, waits: []int64{ms, 20 * ms}}
	rows[cartFairRow] = row{rates: []float64{2000, 1000, 1000}, waits: []int64{ms, 40 * ms}}
	// The fastest in the second and third rounds, by medians too.
	rows[cartRedislockRow] = row{rates: []float64{1000, 2500, 4000}, waits: []int64{ms, 100 * ms}}
	rows[cartRedsyncRow] = row{rates: []float64{500, 500, 500}, waits: []int64{ms}, cut: []int64{300 * ms}}
	// Per round 3000/2000, 3000/2500, 3000/4000: a median of 1.20×, 20% short of 1.5×.
	ratio, best, ok := cartVersus(sc, rows)
	if !ok || best != cartRedislockRow || fmt.Sprintf("%.2f", ratio) != "1.20" {
		t.Fatalf("cartVersus: %.3f, best row %d, ok %t; want 1.20, %d, true", ratio, best, ok, cartRedislockRow)
	}
	got := cartSummary(sc, rows)
	for _, want := range []string{"aqs multilock 1.20×", "(" + implNames[cartRedislockRow] + " has the highest median)",
		"max wait 20.0 ms, against 40.0 ms for " + implNames[cartFairRow], "missed: the rate by 20%"} {
		if !strings.Contains(got, want) {
			t.Errorf("summary %q\nlacks %q", got, want)
		}
	}
	if strings.Contains(got, "the max wait") {
		t.Errorf("summary %q: the multi-lock's max wait is the lowest, yet it is said missed", got)
	}

	rows[cartMultiRow].rates = []float64{9000, 9000, 9000}
	rows[cartMultiRow].waits = []int64{ms, 50 * ms}
	if got := cartSummary(sc, rows); !strings.Contains(got, "missed: the max wait.") {
		t.Errorf("a multi-lock fast enough but with a higher max wait: %q", got)
	}
	rows[cartMultiRow].waits = []int64{ms, 30 * ms}
	if got := cartSummary(sc, rows); !strings.HasSuffix(got, ": met.") {
		t.Errorf("a multi-lock fast enough with the lowest max wait: %q", got)
	}
}

// TestEveryCartRowHoldsWholeCartsAlone runs every cart row's goroutines on a pool of names so
// small that their carts collide all the time, and checks that no name is ever held twice,
// that every goroutine gets its carts, and that nothing is left held: at the end one cart of
// the whole pool is taken at once.
func TestEveryCartRowHoldsWholeCartsAlone(t *testing.T) {
	for _, topo := range []struct {
		name string
		rdb  func(t *testing.T) redis.UniversalClient
	}{
		{"single", func(t *testing.T) redis.UniversalClient { return redistest.Single(t).Client(t) }},
		{"cluster", func(t *testing.T) redis.UniversalClient {
			cc := redis.NewClusterClient(redistest.Cluster(t).Options())
			t.Cleanup(func() { cc.Close() })
			return cc
		}},
	} {
		t.Run(topo.name, func(t *testing.T) {
			rdb := topo.rdb(t)
			client := redistest.NewClient(t, rdb)
			impls := newCartImpls(client, &tripCounter{}, redislock.New(rdb), redsync.New(redsyncgoredis.NewPool(rdb)), &tripCounter{})
			for i, im := range impls {
				t.Run(im.name, func(t *testing.T) {
					key := fmt.Sprintf("%s:%d", redistest.Name(t), i)
					checkCartRow(t, client, im, key)
				})
			}
		})
	}
}

func checkCartRow(t *testing.T, client *aqs.Client, im *impl, key string) {
	const pool, goroutines, carts = 6, 8, 25
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wit := newLocalWitness()
	acquire, err := cartLocks(im, key, pool, goroutines, wit)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range carts {
				release, err := acquire[g](ctx)
				if err != nil {
					errs <- fmt.Errorf("goroutine %d: %w", g, err)
					return
				}
				spin(20 * time.Microsecond)
				if err := release(); err != nil {
					errs <- fmt.Errorf("goroutine %d, release: %w", g, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := wit.overlaps.Load(); n != 0 {
		t.Errorf("%d names held by two carts at once", n)
	}
	// Nothing left held: the whole pool, as one cart, is free.
	names := make([]string, pool)
	for j := range names {
		names[j] = cartName(key, j)
	}
	slices.Sort(names)
	takeAll, err := im.carts(names, 1)
	if err != nil {
		t.Fatal(err)
	}
	within, cancelWithin := context.WithTimeout(ctx, 5*time.Second)
	defer cancelWithin()
	release, err := takeAll[0](within, names)
	if err != nil {
		t.Fatalf("after every cart was released, the whole pool as one cart: %v", err)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
}

func TestReportMethodPutsTheCartsFiguresAndTheVersionsInTheirPlaces(t *testing.T) {
	var b strings.Builder
	writeReport(&b, machine{}, config{rounds: 9, slice: 300 * time.Millisecond, work: 10 * time.Microsecond}, nil)
	report := b.String()
	for _, want := range []string{
		fmt.Sprintf("a cart of %d to %d names at once", cartMin, cartMax),
		fmt.Sprintf("pause %v ± 50%%, start again", cartBackoff),
		"go-redsync/redsync " + version("github.com/go-redsync/redsync/v4") + ":",
		"bsm/redislock " + version("github.com/bsm/redislock") + ",",
		"redis/rueidis " + version("github.com/redis/rueidis") + " rueidislock",
		"go-redis " + version("github.com/redis/go-redis/v9") + " client",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("the report's Method lacks %q", want)
		}
	}
	if strings.Contains(report, "%!") {
		t.Errorf("the report has a formatting error: %s", report[strings.Index(report, "%!")-60:][:120])
	}
}
