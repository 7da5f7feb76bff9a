package semaphore

import (
	"context"
	"fmt"

	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/scripts"
)

// Forced release, for administration (the aqs command's "unlock --force"): the permits come
// back whoever took them, and the queue is served in order, as a release serves it. Both run
// sem_force.lua.

// ForceRelease makes every permit available again, whoever took them, and grants them to the
// queued waiters it can now satisfy, in order. It returns how many permits were taken. It
// fails with ErrNotSet, and changes nothing, when the permits were never set.
//
// Counting permits are not owned, so their takers are not told: a later Release of theirs
// fails with ErrOverRelease while the permits are still available, but once waiters took them
// it gives permits back a second time. Use it when the takers are known to be gone (a process
// that died holding permits), not to break a live one's hold.
func (s *Semaphore) ForceRelease(ctx context.Context) (int, error) {
	return forceRelease(ctx, &s.base, s.keys, "c")
}

// ForceRelease drops every leased permit, whoever holds it, and grants the permits to the
// queued waiters it can now satisfy, in order. It returns how many permits were leased to live
// permits. It fails with ErrNotSet, and changes nothing, when the permits were never set.
//
// The holders' permit contexts are cancelled with aqs.ErrLockLost at their Client's next
// renewal check (every third of its watchdog timeout), and their Release fails with
// ErrPermitExpired. Meant for administration, not for normal release.
func (l *Leased) ForceRelease(ctx context.Context) (int, error) {
	return forceRelease(ctx, &l.base, l.keys, "l")
}

// forceRelease runs sem_force.lua for either kind; grants to this Client's own waiters come
// back in the reply and are told through the hub, as a release's are.
func forceRelease(ctx context.Context, b *base, keys []string, kind string) (int, error) {
	if err := b.rt.Check(); err != nil {
		return 0, err
	}
	v, err := scripts.SemForce.Run(ctx, b.rt.Pipe, keys, b.args(b.rt.PublishCommand(), b.rt.ID, kind)...).Result()
	if err != nil {
		return 0, core.RedisError(b.key, err)
	}
	r, err := b.reply(v)
	switch {
	case err != nil:
		return 0, err
	case r.Status == scripts.SemNotSet:
		return 0, fmt.Errorf("semaphore %q: %w", b.name, ErrNotSet)
	}
	return int(r.Value), nil
}
