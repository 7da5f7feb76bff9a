package core

import (
	"errors"
	"io"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// errReleasedUnseen is SendRelease's report of a release done by a send whose reply was lost.
var errReleasedUnseen = errors.New("aqs: released by a send whose reply was lost")

// ReleasedUnseen reports whether err says that SendRelease's release was done by a send whose
// reply was lost: the release succeeded, and what it did besides (a hand-off, grants to
// waiters of this Client) is unknown.
func ReleasedUnseen(err error) bool { return errors.Is(err, errReleasedUnseen) }

// SendRelease sends the release that ends a hold through send, a call that go-redis does not
// send again after a broken connection (scripts.Script.RunOnce), and returns its reply.
//
// go-redis's own retry would run the release a second time, which finds the hold gone and
// says so as if it had been lost. Instead, while the outcome is unknown (no reply: the
// connection broke, or could not be made), SendRelease sends the release again, for a few
// seconds, as a release must reach Redis. Any other error (a reply of Redis's, one that
// cannot be decoded, a closed client) is returned at once. A reply that says the hold is gone (gone) after an
// unknown outcome is then the earlier send's doing, when it came back before trusted (the
// hold's TrustedUntil, asked before its last local release): the lease was running, so the
// hold can have gone only by that send, or by a forced release or a loss of Redis's data in
// the moment between the two. SendRelease then returns an error matching ReleasedUnseen.
// Otherwise it returns the last reply, or the last error.
//
// h is the hold the release ends (nil for none): its id stays in use (see orphan.go) until
// SendRelease returns, so that nothing this Client holds is given back as unused while its
// release is on its way.
func SendRelease[R any](rt *Runtime, h *Hold, trusted time.Time, send func() (R, error), gone func(R) bool) (R, error) {
	defer h.Settle()
	unknown := false
	for delay := 20 * time.Millisecond; ; delay *= 2 {
		r, err := send()
		if err == nil {
			if unknown && gone(r) && time.Now().Before(trusted) {
				return r, errReleasedUnseen
			}
			return r, nil
		}
		if Transient(err) && delay <= 2*time.Second && rt.Check() == nil {
			time.Sleep(delay) // refused, not run: sent again after a pause, not a wait for a condition
			continue
		}
		if !unknownOutcome(err) || delay > 2*time.Second || rt.Check() != nil {
			return r, err
		}
		unknown = true
		time.Sleep(delay) // a pause before sending again, not a wait for a condition
	}
}

// Transient reports whether err is a refusal by the server that ran nothing, for the moment
// of a failover: CLUSTERDOWN (a slot's master failed, and its replica is not promoted yet),
// TRYAGAIN, LOADING, MASTERDOWN, READONLY (a master turned replica), NOREPLICAS
// (min-replicas-to-write). go-redis sends most of them again a few times itself; a release,
// which must reach Redis, sends them again for longer.
func Transient(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	msg := re.Error()
	for _, p := range []string{"CLUSTERDOWN", "TRYAGAIN", "LOADING", "MASTERDOWN", "READONLY", "NOREPLICAS"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// unknownOutcome reports whether err leaves a command's outcome unknown: the connection broke
// (after the command was sent, or before), or none could be had.
func unknownOutcome(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, redis.ErrPoolTimeout)
}
