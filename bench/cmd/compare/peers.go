package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
)

// The fair peers: locks on other servers that grant in the order of arrival, as aqs fair does,
// each beside its own server's floor.
//
// etcd's concurrency.Mutex queues a waiter as a key under the lock's prefix, created with a
// lease, and wakes it when the key created just before it is deleted; ZooKeeper's lock recipe
// (go-zookeeper's zk.Lock, the recipe of ZooKeeper's documentation) does the same with an
// ephemeral sequential node and a watch on its predecessor. Both wake one waiter, in order,
// and every hand-off is a write that the server replicates and, by default, syncs to disk.
// etcd's waiter watches from the revision it last read, which etcd serves as an unsynced
// watcher, caught up by a loop that runs every 100ms: a hand-off to a waiter that began
// watching just before can wait for that loop, whatever the disk.
//
// A server floor row is the cheapest correct lock cycle of that server, with no queue: on a
// key of its own per goroutine, so nothing waits, a create that fails if the key exists (tied
// to the session's lease, or an ephemeral node, as the locks' keys are), the critical section,
// and a delete. Two writes, as a hand-off of the peer's lock has at the least: how far a lock
// is from its server's floor is what the lock costs beyond the server.
//
// Both peers run in the many-names scenarios too: a lock per name, a holder's key or node per
// name, as an application would use them.

// The peers' server variants, for which rows run on which server (peerVariant).
const (
	noPeer = iota
	etcdFsync
	etcdNoFsync
	zkVariant
)

// The peers' rows in implNames.
const (
	etcdFloorFsync = capacityRow + 3 + iota
	etcdMutexFsync
	etcdFloorNoFsync
	etcdMutexNoFsync
	zkFloorRow
	zkLockRow
)

// peerVariant returns the server variant that row i runs on, noPeer for a Redis row.
func peerVariant(i int) int {
	switch i {
	case etcdFloorFsync, etcdMutexFsync:
		return etcdFsync
	case etcdFloorNoFsync, etcdMutexNoFsync:
		return etcdNoFsync
	case zkFloorRow, zkLockRow:
		return zkVariant
	}
	return noPeer
}

// isPeerFloor says whether row i is a peer's server floor (an operation, not a lock).
func isPeerFloor(i int) bool {
	return i == etcdFloorFsync || i == etcdFloorNoFsync || i == zkFloorRow
}

// errPeerNotStarted is the error of a peer's row in a process that has no address for its
// server: the parent left the peer out.
var errPeerNotStarted = errors.New("compare: this peer's server was not started")

// newPeerImpls connects to the peers' servers that the parent started (their addresses in the
// environment) and returns their rows, in the order of implNames; the clients' closers go to
// p. A peer not started gets rows that fail.
func newPeerImpls(ctx context.Context, p *procImpls) ([]*impl, error) {
	var out []*impl
	for _, v := range []struct {
		env          string
		floor, mutex int
	}{{etcdFsyncEnv, etcdFloorFsync, etcdMutexFsync}, {etcdNoFsyncEnv, etcdFloorNoFsync, etcdMutexNoFsync}} {
		floor, mutex, err := newEtcdImpls(ctx, p, os.Getenv(v.env))
		if err != nil {
			return nil, fmt.Errorf("etcd at %s: %w", os.Getenv(v.env), err)
		}
		floor.name, mutex.name = implNames[v.floor], implNames[v.mutex]
		out = append(out, floor, mutex)
	}
	floor, lock, err := newZKImpls(p, os.Getenv(zkEnv))
	if err != nil {
		return nil, fmt.Errorf("ZooKeeper at %s: %w", os.Getenv(zkEnv), err)
	}
	floor.name, lock.name = implNames[zkFloorRow], implNames[zkLockRow]
	return append(out, floor, lock), nil
}

// notStarted returns a floor row and a lock row that fail: their server is not running.
func notStarted() (floor, lock *impl) {
	return &impl{op: func(string, func()) error { return errPeerNotStarted }},
		&impl{locks: func(string, int) ([]acquireFunc, error) { return nil, errPeerNotStarted }}
}

// newEtcdImpls returns the floor and the Mutex rows of the etcd at url ("" when not started).
//
// A Mutex's key is its prefix and its Session's lease: every Mutex of one Session is the same
// holder, and re-locking one that is held succeeds at once (etcd's Lock takes the key it
// finds as its own). So one client per process, as an application has, and a Session per
// goroutine, the unit that holds the lock; goroutine g of every slice uses Session g, made
// the first time a slice has that many goroutines (in the warm-up round).
func newEtcdImpls(ctx context.Context, p *procImpls, url string) (floor, mutex *impl, err error) {
	if url == "" {
		floor, mutex = notStarted()
		return floor, mutex, nil
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, nil, err
	}
	p.closers = append(p.closers, func() { cli.Close() })
	var (
		mu       sync.Mutex
		sessions []*concurrency.Session
	)
	p.closers = append(p.closers, func() {
		for _, s := range sessions {
			s.Close() // revokes its lease
		}
	})
	// session returns goroutine g's Session.
	session := func(g int) (*concurrency.Session, error) {
		mu.Lock()
		defer mu.Unlock()
		for len(sessions) <= g {
			s, err := concurrency.NewSession(cli, concurrency.WithContext(context.Background()))
			if err != nil {
				return nil, err
			}
			sessions = append(sessions, s)
		}
		return sessions[g], nil
	}
	floorSession, err := session(0)
	if err != nil {
		return nil, nil, err
	}
	bg := context.Background()

	floor = &impl{op: func(key string, hold func()) error {
		// The key's lease is the process's first Session's: a lock key that outlives a dead
		// holder for its lease's time at most, as the Mutex's does.
		put, err := cli.Txn(bg).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, "", clientv3.WithLease(floorSession.Lease()))).
			Commit()
		if err != nil {
			return err
		}
		if !put.Succeeded {
			return fmt.Errorf("etcd floor: %s is taken", key)
		}
		hold()
		// Delete only the key this cycle created: the compare-and-delete of Redis's floor.
		del, err := cli.Txn(bg).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", put.Header.Revision)).
			Then(clientv3.OpDelete(key)).
			Commit()
		if err == nil && !del.Succeeded {
			err = fmt.Errorf("etcd floor: %s changed hands", key)
		}
		return err
	}}

	mutex = &impl{locks: func(key string, n int) ([]acquireFunc, error) {
		out := make([]acquireFunc, n)
		for g := range out {
			s, err := session(g)
			if err != nil {
				return nil, err
			}
			m := concurrency.NewMutex(s, key)
			out[g] = func(ctx context.Context) (func() error, error) {
				// Lock deletes its key when ctx ends first (the slice's end).
				if err := m.Lock(ctx); err != nil {
					return nil, err
				}
				return func() error { return m.Unlock(bg) }, nil
			}
		}
		return out, nil
	}}
	return floor, mutex, nil
}

// zkACL is the ACL of every node the ZooKeeper rows create: anyone may do anything.
var zkACL = zk.WorldACL(zk.PermAll)

// newZKImpls returns the floor and the lock recipe rows of the ZooKeeper server at addr (""
// when not started): one connection, and so one session, per process. Unlike etcd's, a
// zk.Lock is its own holder (its own sequential node), so the goroutines share the session.
func newZKImpls(p *procImpls, addr string) (floor, lock *impl, err error) {
	if addr == "" {
		floor, lock = notStarted()
		return floor, lock, nil
	}
	conn, events, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		return nil, nil, err
	}
	p.closers = append(p.closers, conn.Close)
	// Connect returns before the session exists; wait for it (later events are dropped).
	for timeout := time.After(10 * time.Second); conn.State() != zk.StateHasSession; {
		select {
		case <-events:
		case <-timeout:
			return nil, nil, errors.New("no session within 10s")
		}
	}

	floor = &impl{op: func(key string, hold func()) error {
		path, err := conn.Create("/"+key, nil, zk.FlagEphemeral, zkACL)
		if err != nil {
			return err
		}
		hold()
		return conn.Delete(path, -1) // an ephemeral node: only this session can have made it
	}}

	lock = &impl{locks: func(key string, n int) ([]acquireFunc, error) {
		// The recipe's node is the parent of its waiters' nodes. Lock creates it when it is
		// missing, at a cost of three more round trips in the slice; create it now instead,
		// in the background, so that a thousand names are not a thousand creates in a row
		// before the slice starts. Each acquisition of the name waits for that create first.
		parent := "/" + key
		created := make(chan error, 1)
		go func() {
			_, err := conn.Create(parent, nil, 0, zkACL)
			if errors.Is(err, zk.ErrNodeExists) { // another process's
				err = nil
			}
			created <- err
			close(created)
		}()
		var once sync.Once
		var createErr error
		ready := func() error {
			once.Do(func() { createErr = <-created })
			return createErr
		}
		out := make([]acquireFunc, n)
		for g := range out {
			l := zk.NewLock(conn, parent, zkACL)
			// zk.Lock takes no context: a Lock pending at the slice's end waits for its turn
			// in the queue, which drains in holds of the critical section's length. Such a
			// wait counts as a completed wait; its acquisition after the end does not count.
			out[g] = func(context.Context) (func() error, error) {
				if err := ready(); err != nil {
					return nil, err
				}
				if err := l.Lock(); err != nil {
					return nil, err
				}
				return l.Unlock, nil
			}
		}
		return out, nil
	}}
	return floor, lock, nil
}
