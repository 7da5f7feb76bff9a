package excl

import (
	"context"
	"time"

	"github.com/redaqs/aqs/internal/acquire"
	"github.com/redaqs/aqs/internal/cond"
	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/layout"
	"github.com/redaqs/aqs/internal/scripts"
)

// NewCond returns the condition of the given name of l (see internal/cond).
func (l *Lock) NewCond(name string) (*cond.Cond, error) { return cond.New(condSide{l}, name) }

// condSide is l as its conditions see it.
type condSide struct{ l *Lock }

func (s condSide) CondLock() cond.Lock {
	l := s.l
	return cond.Lock{RT: l.rt, Kind: l.cfg.Kind, Name: l.name, Key: l.key, Keys: l.keys, Queue: l.q,
		WaiterTimeout: l.cfg.WaiterTimeout, Primitive: l.cfg.Kind, Signal: scripts.CondSignal, Beat: scripts.CondBeat}
}

func (condSide) CondMember(hold, lease string) string { return layout.LockMemberMs(hold, lease) }

func (s condSide) CondRules(lease string) acquire.Rules {
	return &rules{l: s.l, lease: lease, leaseArg: lease}
}

func (s condSide) CondHold(lease time.Duration) *acquire.HoldSpec {
	return s.l.side.Hold(lease, true, false)
}

func (s condSide) CondBeatArgs(hold, lease string) []any { return []any{hold, lease, s.l.timeout} }

func (s condSide) ReleaseToCond(ctx context.Context, h *core.Hold, trusted time.Time, cq []string, member string) (bool, error) {
	return s.l.releaseToCond(ctx, h, trusted, cq, member)
}

// releaseToCond ends hold h and puts member on the condition cq (cond_wait.lua), through the
// engine's release, which settles this Client's other waiters of the lock as at an Unlock.
func (l *Lock) releaseToCond(ctx context.Context, h *core.Hold, trusted time.Time, cq []string, member string) (bool, error) {
	keys := append(append([]string{}, l.keys...), cq...)
	return l.side.ReleaseToCond(ctx, h, trusted, func(ctx context.Context, e acquire.Ending) (scripts.Release, error) {
		args := make([]any, 0, 7+len(e.Riders))
		args = append(args, h.ID, "1", l.rt.PublishCommand(), l.timeout, e.Pick, Flag(e.Over), member)
		for _, m := range e.Riders {
			args = append(args, m)
		}
		return l.side.Run(ctx, scripts.CondWait, e.Once, keys, args...)
	})
}
