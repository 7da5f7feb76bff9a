package chaos_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// The witness of mutual exclusion.
//
// Whoever holds a primitive enters its witness, and leaves it before the release. The
// witness does not ask Redis: it is a set of files in a directory shared by the test and its
// children, with flock(2) locks taken without waiting. A lock that cannot be taken at once
// means that someone else is inside where nobody else may be: an overlap. The kernel drops a
// process's flocks when it dies, so a holder killed with SIGKILL leaves the witness at that
// instant, long before its lease runs out in Redis and anyone may enter again; the witness never
// counts that as an overlap. (A stopped process keeps its flocks: the stall test, whose holders
// are expected to overlap in time, checks fencing tokens instead.)
//
//   - exclusive (a lock, the write side): flock LOCK_EX on "x";
//   - read side: flock LOCK_SH on "x", so readers share and a writer excludes them;
//   - n permits of k: n of the slot files "slot0".."slot<k-1>" with LOCK_EX, looked for under
//     the blocking LOCK_EX of "mutex", so that the count of slots taken is exact: fewer than n
//     free means more than k permits in use.
//
// Every acquisition opens its files afresh: flocks of different open files conflict, in one
// process as across processes.

type witness struct {
	dir     string
	permits int // semaphores: the total
}

// errOverlap is returned by enter when someone else is inside where the caller may not be.
var errOverlap = errors.New("overlap: the witness is taken")

// enter enters the witness for op (see prim_test.go). On errOverlap the caller is inside all
// the same, with what it could take; leave must be called either way when err is nil or
// errOverlap.
func (w witness) enter(op string) (leave func(), err error) {
	if w.dir == "" {
		return func() {}, nil // no witness (the stall test's holders overlap in time by design)
	}
	switch op {
	case opExclusive, opRead:
		how := syscall.LOCK_EX
		if op == opRead {
			how = syscall.LOCK_SH
		}
		f, err := os.OpenFile(filepath.Join(w.dir, "x"), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return nil, err
		}
		if err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return func() {}, errOverlap
			}
			return nil, err
		}
		return func() { f.Close() }, nil // closing the file drops its flock
	}
	n, err := strconv.Atoi(op)
	if err != nil {
		return nil, fmt.Errorf("witness: bad operation %q", op)
	}
	mu, err := os.OpenFile(filepath.Join(w.dir, "mutex"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	defer mu.Close()
	if err := syscall.Flock(int(mu.Fd()), syscall.LOCK_EX); err != nil {
		return nil, err
	}
	var taken []*os.File
	leave = func() {
		for _, f := range taken {
			f.Close()
		}
	}
	for i := 0; i < w.permits && len(taken) < n; i++ {
		f, err := os.OpenFile(filepath.Join(w.dir, "slot"+strconv.Itoa(i)), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			leave()
			return nil, err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				continue
			}
			leave()
			return nil, err
		}
		taken = append(taken, f)
	}
	if len(taken) < n {
		return leave, errOverlap
	}
	return leave, nil
}
