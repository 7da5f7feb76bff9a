package semaphore

import "errors"

// The errors of package semaphore. Each leaves the semaphore unchanged.
var (
	// ErrNotSet is returned by calls on a semaphore whose permits were never set (see
	// TrySetPermits and AddPermits), unless it was made WithSize.
	ErrNotSet = errors.New("semaphore: permits not set")
	// ErrTooManyPermits is returned by Acquire and TryAcquire asking for more permits than the
	// semaphore has in total, at once rather than after a wait that could never end. A waiter
	// gets it too when AddPermits lowers the total below its request.
	ErrTooManyPermits = errors.New("semaphore: more permits asked than the semaphore has")
	// ErrInsufficientPermits is returned by AddPermits asked to remove more permits than are
	// available: a reduction never waits for permits to come back.
	ErrInsufficientPermits = errors.New("semaphore: fewer permits available than the reduction")
	// ErrOverRelease is returned by a release that would give back more permits than were
	// taken: for Semaphore, one that would make more permits available than the total; for
	// Leased, a partial release of more permits than the permit holds.
	ErrOverRelease = errors.New("semaphore: more permits released than taken")
	// ErrPermitExpired is returned by Leased's releases and SetLease when Redis has no live
	// permit of that id: its lease ran out (its permits went back to the semaphore). It also
	// matches aqs.ErrLockLost.
	ErrPermitExpired = errors.New("semaphore: permit expired")
	// ErrPermitReleased is returned by Leased's releases and SetLease of a permit that a
	// release by its id ended (Leased.ReleaseID, from any process), and by a release by that id
	// again. It also matches aqs.ErrNotOwner. The permit's held context ends with
	// aqs.ErrReleased.
	ErrPermitReleased = errors.New("semaphore: permit released by its id")
)
