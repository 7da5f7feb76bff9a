package rwlock

import (
	"context"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/core"
)

// RLocker returns the read side of l as an aqs.Locker, as sync.RWMutex.RLocker does, for code
// written against a Locker: its Lock is RLock and its Unlock is RUnlock, with their ordering
// and failures. Its Lock takes aqs.WithLease; aqs.WithFencingToken fails with
// aqs.ErrInvalidArgument before anything is sent (read holds have no fencing token). For a
// sync.Locker, wrap it: aqs.NewSyncLocker(ctx, l.RLocker()).
func (l *Lock) RLocker() aqs.Locker { return readLocker{l} }

type readLocker struct{ l *Lock }

func (r readLocker) Lock(ctx context.Context, opts ...aqs.LockOption) (context.Context, error) {
	cfg, err := core.ApplyOptions(opts)
	switch {
	case err != nil:
		return nil, err
	case cfg.Token:
		return nil, core.Invalid("rwlock %q: a read hold has no fencing token", r.l.name)
	case cfg.Lease > 0:
		return r.l.RLock(ctx, aqs.WithLease(cfg.Lease))
	}
	return r.l.RLock(ctx)
}

func (r readLocker) Unlock(held context.Context) error { return r.l.RUnlock(held) }
