package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/rwlock"
	"github.com/redaqs/aqs/semaphore"
)

const unlockSynopsis = `Releases whatever holds NAME, whoever holds it, and lets the waiters in, with the
primitives' own forced release: a lock's holder (a read-write lock's writer and
every reader) loses it and the next waiter gets it; a counting semaphore's permits
all become available; a leased semaphore's permits are all dropped. The former
holders' held contexts end with aqs.ErrLockLost at their next lease renewal.
Counting permits have no owner: their takers are not told, and a Release of theirs
gives permits back a second time once waiters took them.

--force is required: this breaks holds that are not yours. It shows what it will
release and asks for confirmation on stdin unless --yes is given; if the holder
changed while it asked, it releases nothing.`

// confirmInput is where unlock reads its answer. Tests replace it.
var confirmInput io.Reader = os.Stdin

// errNotConfirmed is returned when the answer was not yes.
var errNotConfirmed = errors.New("not confirmed: nothing changed")

func runUnlock(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "unlock --force NAME", unlockSynopsis)
	af := addAdminFlags(fs)
	force := fs.Bool("force", false, "release whoever holds NAME (required)")
	yes := fs.Bool("yes", false, "do not ask for confirmation")
	name, err := parseWithName(fs, args)
	if err != nil {
		return err
	}
	if !*force {
		return usagef("unlock breaks holds that are not yours: give --force to mean it")
	}
	a, err := openAdmin(ctx, e, af)
	if err != nil {
		return err
	}
	defer a.Close()

	st, err := inspectName(ctx, a.rdb, a.prefix, name)
	if err != nil {
		return err
	}
	if !st.Held {
		fmt.Fprintf(e.stdout, "nothing to release: %s %q is not held (%s)\n", primTitle[st.Kind], name, heldStatus(st))
		return nil
	}
	what := describeHeld(st)
	if !*yes {
		fmt.Fprintf(e.stderr, "release %s? [y/N] ", what)
		answer, err := bufio.NewReader(confirmInput).ReadString('\n')
		if err != nil && answer == "" {
			fmt.Fprintln(e.stderr)
			return fmt.Errorf("no answer on stdin (give --yes not to be asked): nothing changed")
		}
		switch strings.ToLower(strings.TrimSpace(answer)) {
		case "y", "yes":
		default:
			return errNotConfirmed
		}
		// The answer may have taken a while: release only what was confirmed.
		now, err := inspectName(ctx, a.rdb, a.prefix, name)
		if err != nil {
			return err
		}
		if now.Kind != st.Kind || !slices.Equal(lockHolds(now), lockHolds(st)) {
			return fmt.Errorf("%s changed while you answered (now: %s): nothing released; run aqs unlock again",
				name, heldStatus(now))
		}
	}

	client, err := aqs.New(ctx, a.rdb, aqs.WithKeyPrefix(a.prefix))
	if err != nil {
		return fmt.Errorf("connecting to Redis at %s: %w", a.addr, err)
	}
	defer client.Close()
	released, err := forceByKind(ctx, client, st)
	if err != nil {
		return err
	}
	if !released {
		fmt.Fprintf(e.stdout, "nothing released: %s was no longer held\n", name)
		return nil
	}
	fmt.Fprintf(e.stdout, "released %s\n", what)

	after, err := inspectName(ctx, a.rdb, a.prefix, name)
	switch {
	case isNothing(err):
		fmt.Fprintf(e.stdout, "now: nothing at %s (free)\n", name)
	case err != nil:
		return fmt.Errorf("released, but reading %s again: %w", name, err)
	default:
		fmt.Fprint(e.stdout, "now: ")
		printState(e.stdout, after)
	}
	return nil
}

// forceByKind releases the primitive st describes with its own forced release, and reports
// whether anything was held.
func forceByKind(ctx context.Context, c *aqs.Client, st *nameState) (bool, error) {
	switch st.Kind {
	case primRW:
		l, err := rwlock.New(c, st.Name)
		if err != nil {
			return false, err
		}
		return l.ForceUnlock(ctx)
	case primSemaphore:
		s, err := semaphore.New(c, st.Name)
		if err != nil {
			return false, err
		}
		n, err := s.ForceRelease(ctx)
		return n > 0, err
	case primLeased:
		l, err := semaphore.NewLeased(c, st.Name)
		if err != nil {
			return false, err
		}
		n, err := l.ForceRelease(ctx)
		return n > 0, err
	}
	// A reentrant or a fair lock, whose forced releases are one (the same script on the same
	// keys): it hands the lock to the live head of the queue, or frees it. It frees a
	// read-write lock's writer alone as well: nothing else of that lock exists to serve. But
	// should a reader or writer of that read-write lock have queued since the snapshot, the
	// lock's script cannot read its member and fails: the writer keeps the lock, that
	// waiter's entry is dropped (it joins again, at the tail), and the error is reported.
	l, err := fair.New(c, st.Name)
	if err != nil {
		return false, err
	}
	return l.ForceUnlock(ctx)
}

// describeHeld names what st holds, for the question and the report: "lock "x" held by H
// (count 2, token T, lease 29.9s left); 2 waiting".
func describeHeld(st *nameState) string {
	s := fmt.Sprintf("%s %q", primTitle[st.Kind], st.Name)
	switch st.Kind {
	case primSemaphore:
		s += ": " + heldStatus(st)
	case primLeased:
		var ps []string
		for _, h := range st.Holders {
			ps = append(ps, fmt.Sprintf("%s: %d", h.Hold, h.Permits))
		}
		const shown = 3
		to := strings.Join(ps[:min(len(ps), shown)], ", ")
		if len(ps) > shown {
			to += fmt.Sprintf(" and %d more", len(ps)-shown)
		}
		s += fmt.Sprintf(": %d of %d permits leased (%s), %d available",
			st.Permits.Taken, st.Permits.Total, to, st.Permits.Available)
	default:
		if !st.Held {
			return s
		}
		s += " " + heldStatus(st)
		if len(st.Holders) == 1 && st.Holders[0].Mode != "read" {
			h := st.Holders[0]
			s += fmt.Sprintf(" (count %d, token %s, lease %s left)", h.Count, tokenText(h.Token), leaseText(h.LeaseRemainingMS))
		}
	}
	if n := len(st.Waiters); n > 0 {
		s += fmt.Sprintf("; %d waiting", n)
	}
	return s
}

// lockHolds returns the hold ids of a lock's holders, sorted; nil for a semaphore, whose
// permits come and go: releasing them all is what was confirmed, whoever has them now.
func lockHolds(st *nameState) []string {
	if st.Permits != nil {
		return nil
	}
	var ids []string
	for _, h := range st.Holders {
		ids = append(ids, h.Hold)
	}
	slices.Sort(ids)
	return ids
}

// isNothing reports whether err says that nothing is at the name.
func isNothing(err error) bool {
	var n *errNothing
	return errors.As(err, &n)
}
