package election_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/election"
	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// callbacks are those of client-go's leader election (k8s.io/client-go/tools/leaderelection,
// LeaderCallbacks), for run.
type callbacks struct {
	// OnStartedLeading runs once the candidate leads, with a context that ends when the
	// leadership does (or run's context), in a goroutine of its own.
	OnStartedLeading func(ctx context.Context)
	// OnStoppedLeading runs once the candidate stopped leading, before the leadership is
	// handed on.
	OnStoppedLeading func()
	// OnNewLeader runs for each new leader, this candidate included.
	OnNewLeader func(identity string)
}

// run is client-go's LeaderElector.Run on an election: it campaigns as identity, reports
// every new leader, and once it leads runs OnStartedLeading until that returns, the
// leadership is lost, or ctx ends; then it runs OnStoppedLeading and resigns, so that the
// next candidate leads. It returns ctx's cause when ctx ends before the candidate leads.
func run(ctx context.Context, e *election.Election, identity string, cb callbacks) error {
	watch, stopWatching := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for l := range e.Observe(watch) {
			cb.OnNewLeader(l.Value)
		}
	}()
	defer func() { stopWatching(); <-watched }()

	leading, err := e.Campaign(ctx, identity)
	if err != nil {
		return err
	}
	// The work ends with the leadership (leading), or when run's caller is done (ctx).
	work, stopWork := context.WithCancel(leading)
	defer context.AfterFunc(ctx, stopWork)()
	worked := make(chan struct{})
	go func() {
		defer close(worked)
		cb.OnStartedLeading(work)
	}()
	select {
	case <-worked:
	case <-work.Done():
	}
	stopWork()
	<-worked
	stopWatching() // the next leader is not this candidate's news any more
	<-watched
	cb.OnStoppedLeading()
	if err := e.Resign(leading); !errors.Is(err, aqs.ErrLockLost) { // lost: nothing to hand on
		return err
	}
	return nil
}

// Two replicas of a controller elect the one that works, in the manner of client-go's leader
// election: node-a leads and works until it shuts down; node-b, standing by, then leads.
func Example_leaderElectionCallbacks() {
	addr, err := redistest.SingleAddr() // an application would use its own Redis address
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()

	// What the callbacks say, in the order it happened (each waits until it is printed).
	said := make(chan string)
	callbacksOf := func(id string) callbacks {
		return callbacks{
			OnStartedLeading: func(ctx context.Context) {
				said <- id + ": started leading"
				<-ctx.Done() // the controller's work, until the replica shuts down
			},
			OnStoppedLeading: func() { said <- id + ": stopped leading" },
			OnNewLeader: func(leader string) {
				if leader != id {
					said <- id + ": the leader is " + leader
				}
			},
		}
	}
	// A replica is a process of its own, with its own Client; here they share one process.
	start := func(id string) (shutdown func(), done <-chan struct{}) {
		ctx, cancel := context.WithCancel(ctx)
		exited := make(chan struct{})
		go func() {
			defer close(exited)
			rdb := redis.NewClient(&redis.Options{Addr: addr})
			defer rdb.Close()
			client, err := aqs.New(ctx, rdb)
			if err != nil {
				log.Fatal(err)
			}
			defer client.Close()
			e, err := election.New(client, "example-controller")
			if err != nil {
				log.Fatal(err)
			}
			if err := run(ctx, e, id, callbacksOf(id)); err != nil && !errors.Is(err, context.Canceled) {
				log.Fatal(err)
			}
		}()
		return cancel, exited
	}

	shutdownA, a := start("node-a")
	fmt.Println(<-said)
	shutdownB, b := start("node-b")
	fmt.Println(<-said)
	shutdownA()
	fmt.Println(<-said)
	fmt.Println(<-said)
	shutdownB()
	fmt.Println(<-said)
	<-a
	<-b
	// Output:
	// node-a: started leading
	// node-b: the leader is node-a
	// node-a: stopped leading
	// node-b: started leading
	// node-b: stopped leading
}

// Observe tells who leads and where to reach it, as it changes: here a leader that moves its
// service to another address proclaims the new one.
func ExampleElection_Observe() {
	addr, err := redistest.SingleAddr() // an application would use its own Redis address
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	client, err := aqs.New(ctx, rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	e, err := election.New(client, "example-primary")
	if err != nil {
		log.Fatal(err)
	}

	watch, stop := context.WithCancel(ctx)
	defer stop()
	changes := e.Observe(watch)

	leading, err := e.Campaign(ctx, "10.0.0.7:5432")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("the primary is at", (<-changes).Value)
	if err := e.Proclaim(leading, "10.0.0.8:5432"); err != nil {
		log.Fatal(err)
	}
	fmt.Println("the primary is at", (<-changes).Value)
	if err := e.Resign(leading); err != nil {
		log.Fatal(err)
	}
	// Output:
	// the primary is at 10.0.0.7:5432
	// the primary is at 10.0.0.8:5432
}
