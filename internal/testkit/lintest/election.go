package lintest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/election"
)

// The election's specification (package election), with the fair lock's queue it stands on.
//
// The state is the fair lock's (FairLockModel): its holder and its queue, and, for the holder,
// whether it leads, its value and its fencing token. A candidate's Campaign waits until it
// leads or its context ends, so it is two operations of the history, as a fair lock's wait is
// (SplitElectionWaits, and wait.go for when each may come): its join, which takes a free lock
// or joins the queue's tail, and its end. A release (Resign, or the fair lock's Unlock of a
// probe) hands the lock to the head of the queue, which does not lead yet.
//
//   - The end of a Campaign that succeeded is legal only if the candidate holds the lock; it
//     leads from then on (the linearization point is its Lead, in Redis), with the value it
//     campaigned with and the token its leading context has.
//   - The end of one that failed is the candidate leaving: out of the queue, or, if it was
//     handed the lock meanwhile, passing it on; it may even have led for a moment (its
//     context ended as its Lead ran), which only a Leader or an observer can have seen.
//   - Proclaim by the leader changes its value; by anyone else it fails with ErrNotOwner and
//     changes nothing. Resign by the holder hands the lock on; by anyone else it is
//     ErrNotOwner.
//   - Leader reports the holder, once it leads, with its latest value and its token; nobody
//     while the lock is free or its holder has not led. A Leader that names the holder with
//     the value it campaigned with, before its Campaign's end, is legal: it saw the Lead, and
//     the holder leads from then on (which is how a Campaign that failed after its Lead is
//     explained).
//   - Each observer's receptions (Observe's channel) are operations too, from the Observe call
//     (or the call that made the change received, whichever is later) to the reception, in
//     the order they came: the k-th is legal only after the (k-1)-th, never the same change as
//     the previous one, and only at an instant when the change received is the current one
//     (the leader and its value then). So each observer sees leaders in the order they led, a
//     subsequence of the true (token, revision) order.
//   - Tokens: every leader's token, once known (from its Campaign, a Leader or an observer),
//     is the same every time, and greater than every earlier leader's known token.
//
// So at most one candidate leads at any instant, and a leading context's interval, from its
// Campaign's return to its Resign's call, never overlaps another's (CheckLeadingIntervals
// checks that on the raw history too). Values name the candidate, its Client and its
// proclaims ("<client>.<hold>.<proclaim>"), so that a reported leader is known by its value,
// and a Leadership whose Client is not the one its value names is illegal.

// Sizes of an election run: the elections, and the observers that watch each.
const (
	Elections         = 2
	ElectionObservers = 2
)

// Operations of an election's history.
const (
	elCampaign    = iota // Campaign, one operation as recorded; SplitElectionWaits makes two
	elJoin               // a Campaign's first attempt: take a free lock, or queue
	elEnd                // a Campaign's outcome: lead, or leave (passing on a lock handed over)
	elProclaim           // Proclaim, by the leader or with a leading context that resigned
	elResign             // Resign, by the leader or with a leading context that resigned
	elLeader             // Leader
	elObserved           // a reception of an observer
	elProbe              // the settle probes: the fair lock of the name, TryLock without wait
	elProbeUnlock        // and its Unlock
)

// electionInput is an operation: the election it concerns, its kind, the hold (a candidate,
// unique to one Campaign, or a probe), for a Proclaim its number (the value's last part), how
// a Campaign waits, the Client that made the call, and for a reception its observer and its
// number (from 1).
type electionInput struct {
	key      int
	op       int
	hold     int
	p        int
	wait     Wait
	client   int
	observer int
	k        int
}

// electionOutput is an operation's result: ok for a Campaign (it leads), a Leader (somebody
// leads) and a probe (it took the lock); notOwner for a Proclaim or Resign that failed with
// aqs.ErrNotOwner; for a Campaign that led, a Leader that reported one and a reception, the
// leader's hold, proclaim and token, and wrongClient when its Leadership's Client is not the
// one its value names.
type electionOutput struct {
	ok          bool
	notOwner    bool
	hold        int
	p           int
	token       int64
	wrongClient bool
}

// electionState is an election's sequential state.
type electionState struct {
	holder int   // the lock's holder, 0 when free
	led    bool  // the holder leads
	p      int   // the leader's value: its campaign's (0) or its latest proclaim's
	token  int64 // the holder's token, 0 while unknown
	floor  int64 // the greatest token known of an earlier leader
	n      int
	queue  [maxQueue]int
	seen   [ElectionObservers]int // receptions linearized, per observer
	last   [ElectionObservers][2]int
}

// handOff ends the hold: the head of the queue holds, not leading yet, or the lock is free.
func (s electionState) handOff() electionState {
	if s.token > s.floor {
		s.floor = s.token
	}
	s.holder, s.led, s.p, s.token = 0, false, 0, 0
	if s.n > 0 {
		s.holder = s.queue[0]
		copy(s.queue[:], s.queue[1:s.n])
		s.n--
		s.queue[s.n] = 0
	}
	return s
}

// learn checks a token reported for the current holder's leadership and records it.
func (s *electionState) learn(token int64) bool {
	switch {
	case s.token != 0:
		return token == s.token
	case token <= s.floor:
		return false
	}
	s.token = token
	return true
}

// reported checks a leader reported (by a Leader or a reception) against the state: it must
// be the holder, which leads, with its current value, or leads from now on when it is seen
// with its campaign's value before it was known to lead.
func (s *electionState) reported(out electionOutput) bool {
	if out.wrongClient || s.holder == 0 || out.hold != s.holder {
		return false
	}
	if !s.led {
		if out.p != 0 {
			return false
		}
		s.led = true
	}
	return out.p == s.p && s.learn(out.token)
}

// ElectionModel is the sequential specification of the election (see above), for histories
// made by SplitElectionWaits from RunElections'.
var ElectionModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		return partitionBy(history, func(in any) int { return in.(electionInput).key })
	},
	Init: func() any { return electionState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(electionState), input.(electionInput), output.(electionOutput)
		switch in.op {
		case elCampaign:
			panic("lintest: ElectionModel needs a history made by SplitElectionWaits")
		case elJoin:
			if s.holder == 0 && s.n == 0 {
				// A Campaign that took the free lock may fail yet, its context ending: it gives
				// the lock back at its end.
				s.holder, s.led, s.p, s.token = in.hold, false, 0, 0
				return true, s
			}
			if s.n == maxQueue {
				panic("lintest: queue of the model full")
			}
			s.queue[s.n] = in.hold
			s.n++
			return true, s
		case elEnd:
			if s.holder == in.hold {
				if !out.ok {
					return true, s.handOff() // handed the lock (and maybe led), it passes it on
				}
				if s.led && s.p != 0 {
					return false, s // it proclaimed before its Campaign returned
				}
				s.led = true
				return s.learn(out.token), s
			}
			i := -1
			for j := range s.n {
				if s.queue[j] == in.hold {
					i = j
				}
			}
			if i < 0 || out.ok {
				return false, s // not joined yet, or led without the lock
			}
			copy(s.queue[i:], s.queue[i+1:s.n])
			s.n--
			s.queue[s.n] = 0
			return true, s
		case elProclaim:
			if s.holder == in.hold && s.led {
				s.p = in.p
				return !out.notOwner, s
			}
			return out.notOwner, s
		case elResign, elProbeUnlock:
			if s.holder == in.hold {
				return !out.notOwner, s.handOff()
			}
			return out.notOwner, s
		case elLeader:
			if !out.ok {
				return s.holder == 0 || !s.led, s
			}
			return s.reported(out), s
		case elObserved:
			o := in.observer
			if s.seen[o] != in.k-1 || s.seen[o] > 0 && s.last[o] == [2]int{out.hold, out.p} {
				return false, s
			}
			if !s.reported(out) {
				return false, s
			}
			s.seen[o], s.last[o] = in.k, [2]int{out.hold, out.p}
			return true, s
		default: // elProbe
			free := s.holder == 0 && s.n == 0
			if out.ok && free {
				s.holder, s.led, s.p, s.token = in.hold, false, 0, 0
			}
			return out.ok == free, s
		}
	},
	Equal: func(a, b any) bool { return a.(electionState) == b.(electionState) },
	Hash: func(state any) uint64 {
		s := state.(electionState)
		h := uint64(s.holder)*31 + uint64(s.p)*7 + uint64(s.token)
		if s.led {
			h++
		}
		for i := range s.n {
			h = h*131 + uint64(s.queue[i])
		}
		for i := range ElectionObservers {
			h = h*17 + uint64(s.seen[i])
		}
		return h
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(electionInput), output.(electionOutput)
		leader := func() string {
			if in.op == elLeader && !out.ok {
				return "nobody"
			}
			return fmt.Sprintf("h%d.%d token %d (client ok %v)", out.hold, out.p, out.token, !out.wrongClient)
		}
		e := fmt.Sprintf("e%d", in.key)
		switch in.op {
		case elJoin:
			return fmt.Sprintf("%s Campaign(h%d, %v) joins (-> %v)", e, in.hold, in.wait, out.ok)
		case elEnd:
			return fmt.Sprintf("%s Campaign(h%d, %v) ends -> %v token %d", e, in.hold, in.wait, out.ok, out.token)
		case elProclaim:
			return fmt.Sprintf("%s Proclaim(h%d.%d) -> notOwner=%v", e, in.hold, in.p, out.notOwner)
		case elResign:
			return fmt.Sprintf("%s Resign(h%d) -> notOwner=%v", e, in.hold, out.notOwner)
		case elLeader:
			return fmt.Sprintf("%s Leader -> %s", e, leader())
		case elObserved:
			return fmt.Sprintf("%s observer %d reception %d: %s", e, in.observer, in.k, leader())
		case elProbe:
			return fmt.Sprintf("%s probe TryLock(h%d) -> %v", e, in.hold, out.ok)
		case elProbeUnlock:
			return fmt.Sprintf("%s probe Unlock(h%d) -> notOwner=%v", e, in.hold, out.notOwner)
		}
		return fmt.Sprintf("%s Campaign(h%d, %v) -> %v", e, in.hold, in.wait, out.ok)
	},
	DescribeState: func(state any) string {
		s := state.(electionState)
		var b strings.Builder
		switch {
		case s.holder == 0:
			b.WriteString("free")
		case s.led:
			fmt.Fprintf(&b, "h%d leads with h%d.%d, token %d", s.holder, s.holder, s.p, s.token)
		default:
			fmt.Fprintf(&b, "h%d holds", s.holder)
		}
		for i := range s.n {
			fmt.Fprintf(&b, " ← h%d", s.queue[i])
		}
		fmt.Fprintf(&b, "; tokens above %d; observers at %v", s.floor, s.seen)
		return b.String()
	},
}

// SplitElectionWaits returns history with every Campaign made into its join and its end for
// ElectionModel, as SplitWaits does for the fair lock, and every reception's window opened no
// earlier than the call that made the change it received: the Campaign of its value's hold,
// or the Proclaim of its value.
func SplitElectionWaits(history []porcupine.Operation) []porcupine.Operation {
	type change struct{ key, hold, p int }
	made := map[change]int64{}
	for _, op := range history {
		switch in := op.Input.(electionInput); in.op {
		case elCampaign:
			made[change{in.key, in.hold, 0}] = op.Call
		case elProclaim:
			made[change{in.key, in.hold, in.p}] = op.Call
		}
	}
	var out []porcupine.Operation
	for _, op := range history {
		in := op.Input.(electionInput)
		switch in.op {
		case elCampaign:
			join, end := in, in
			join.op, end.op = elJoin, elEnd
			j, e := splitWait(op, in.wait, op.Output.(electionOutput).ok, join, end)
			out = append(out, j, e)
			continue
		case elObserved:
			r := op.Output.(electionOutput)
			if call, ok := made[change{in.key, r.hold, r.p}]; ok && call > op.Call {
				op.Call = min(call, op.Return)
			}
		}
		out = append(out, op)
	}
	return out
}

// CheckLeadingIntervals checks, on a history as RunElections recorded it, that the leading
// contexts of one election never overlap: from its Campaign's return to its Resign's call,
// every leader has the election alone.
func CheckLeadingIntervals(t *testing.T, history []porcupine.Operation) {
	t.Helper()
	checked, problems := leadingOverlaps(history)
	for _, p := range problems {
		t.Error(p)
	}
	t.Logf("%d leading intervals checked: %d problems", checked, len(problems))
}

// leadingOverlaps returns how many leading intervals history has, and its problems: two
// intervals of one election that overlap, a resignation of no Campaign that led, a leader
// that never resigned.
func leadingOverlaps(history []porcupine.Operation) (checked int, problems []string) {
	type interval struct {
		hold     int
		from, to int64
	}
	type key struct{ key, hold int }
	from := map[key]int64{}
	var all [][]interval
	for _, op := range history {
		in := op.Input.(electionInput)
		k := key{in.key, in.hold}
		switch {
		case in.op == elCampaign && op.Output.(electionOutput).ok:
			from[k] = op.Return
		case in.op == elResign && !op.Output.(electionOutput).notOwner:
			f, ok := from[k]
			if !ok {
				problems = append(problems, fmt.Sprintf("e%d: h%d resigned without a Campaign that returned leading", in.key, in.hold))
				continue
			}
			for len(all) <= in.key {
				all = append(all, nil)
			}
			all[in.key] = append(all[in.key], interval{in.hold, f, op.Call})
			delete(from, k)
		}
	}
	for k := range from {
		problems = append(problems, fmt.Sprintf("e%d: h%d never resigned", k.key, k.hold))
	}
	for key, list := range all {
		for i, a := range list {
			for _, b := range list[i+1:] {
				if a.from < b.to && b.from < a.to {
					problems = append(problems, fmt.Sprintf("e%d: h%d led from %d to %d, h%d from %d to %d (ns): both at once",
						key, a.hold, a.from, a.to, b.hold, b.from, b.to))
				}
			}
		}
		checked += len(list)
	}
	return checked, problems
}

// electionValue is the value of hold's campaign (p 0) or of its p-th proclaim, by a worker of
// Client client.
func electionValue(client, hold, p int) string { return fmt.Sprintf("%d.%d.%d", client, hold, p) }

// leadershipOutput is the output of a reported leader: its value's hold and proclaim, its
// token, and whether its Client is the one its value names (ids are the Clients' ids). A
// value that is no value of the run fails the test.
func leadershipOutput(l election.Leadership, ids []string) (electionOutput, error) {
	parts := strings.Split(l.Value, ".")
	var n [3]int
	if len(parts) != 3 {
		return electionOutput{}, fmt.Errorf("a leader's value %q is none of the run's", l.Value)
	}
	for i, s := range parts {
		v, err := strconv.Atoi(s)
		if err != nil {
			return electionOutput{}, fmt.Errorf("a leader's value %q is none of the run's", l.Value)
		}
		n[i] = v
	}
	if n[0] < 0 || n[0] >= len(ids) {
		return electionOutput{}, fmt.Errorf("a leader's value %q names no Client of the run", l.Value)
	}
	return electionOutput{ok: true, hold: n[1], p: n[2], token: l.Token, wrongClient: l.Client != ids[n[0]]}, nil
}

// RunElections runs Workers goroutines on each of clients and returns the history they
// recorded on the elections of the run, with ElectionObservers observers of each election
// watching from before the workers start until after the probes: elections[c][k] is election
// k on Client c, probes[c][k] the fair lock of its name on the same Client.
//
// A worker that leads proclaims, reads the leader, or resigns (and keeps the leading context
// for later); one that does not campaigns, on a random election, with a context that reaches
// its deadline or is cancelled by another goroutine after 1-20ms (so that a Campaign may take
// the lock or be handed it as its context ends), reads the leader, or proclaims or resigns
// with a leading context that resigned already. At the end each worker resigns, and each
// election is probed with its fair lock until it is free (see settleAll).
func RunElections(t *testing.T, clients []*aqs.Client, elections [][]*election.Election, probes [][]Locker) []porcupine.Operation {
	ids := make([]string, len(clients))
	for i, c := range clients {
		ids[i] = c.ID()
	}
	// The observers: Observe on the Clients in turn, each reception with its absolute time.
	type reception struct {
		in  electionInput
		out electionOutput
		at  time.Time
	}
	var (
		mu        sync.Mutex
		received  []reception
		failed    error
		watchers  sync.WaitGroup
		observing = make([]time.Time, len(elections[0])*ElectionObservers)
	)
	obsCtx, stopObservers := context.WithCancel(context.Background())
	defer stopObservers()
	for k := range elections[0] {
		for o := range ElectionObservers {
			i := k*ElectionObservers + o
			observing[i] = time.Now()
			ch := elections[i%len(clients)][k].Observe(obsCtx)
			watchers.Go(func() {
				n := 0
				for l := range ch {
					at := time.Now()
					out, err := leadershipOutput(l, ids)
					mu.Lock()
					if err != nil && failed == nil {
						failed = err
					}
					n++
					received = append(received, reception{electionInput{key: k, op: elObserved, observer: o, k: n}, out, at})
					mu.Unlock()
				}
			})
		}
	}

	var holds atomic.Int64
	var start time.Time
	history := Work(clients, func(w *Worker) {
		mine := elections[w.Client]
		rng := w.Rand
		type leading struct {
			ctx    context.Context
			key    int
			hold   int
			p      int
			cancel context.CancelFunc
		}
		var lead *leading
		var resigned []*leading
		resign := func(l *leading, stale bool) bool {
			in := electionInput{key: l.key, op: elResign, hold: l.hold, client: w.Client}
			ok := record(t, w, in, func() (electionOutput, error) {
				err := mine[l.key].Resign(l.ctx)
				if errors.Is(err, aqs.ErrNotOwner) {
					return electionOutput{notOwner: true}, nil
				}
				if err == nil && stale {
					return electionOutput{}, errors.New("a resigned leading context resigned again")
				}
				return electionOutput{}, err
			})
			return ok
		}
		proclaim := func(l *leading, p int) bool {
			in := electionInput{key: l.key, op: elProclaim, hold: l.hold, p: p, client: w.Client}
			return record(t, w, in, func() (electionOutput, error) {
				err := mine[l.key].Proclaim(l.ctx, electionValue(w.Client, l.hold, p))
				if errors.Is(err, aqs.ErrNotOwner) {
					return electionOutput{notOwner: true}, nil
				}
				return electionOutput{}, err
			})
		}
		leader := func(key int) bool {
			in := electionInput{key: key, op: elLeader, client: w.Client}
			return record(t, w, in, func() (electionOutput, error) {
				l, ok, err := mine[key].Leader(context.Background())
				if err != nil || !ok {
					return electionOutput{}, err
				}
				return leadershipOutput(l, ids)
			})
		}
		campaign := func(key int) bool {
			in := electionInput{key: key, op: elCampaign, hold: int(holds.Add(1)), client: w.Client,
				wait: Wait{how: waitDeadline + rng.IntN(2), d: time.Duration(1+rng.IntN(20)) * time.Millisecond}}
			wc := startWait(in.wait, w)
			callAt := w.Now()
			ctx, err := mine[key].Campaign(wc.ctx, electionValue(w.Client, in.hold, 0))
			retAt := w.Now()
			in.wait, _ = wc.ended(callAt)
			var out electionOutput
			switch {
			case err == nil:
				out.ok, out.hold = true, in.hold
				out.token, err = aqs.FencingToken(ctx)
			case contextEnded(in.wait, err):
				err = nil // its wait ran out
			}
			if err != nil {
				wc.cancel()
				t.Errorf("worker %d: %+v: %v", w.ID, in, err)
				return false
			}
			w.Record(in, out, callAt, retAt)
			if !out.ok {
				wc.cancel()
				return true
			}
			lead = &leading{ctx: ctx, key: key, hold: in.hold, cancel: wc.cancel}
			return true
		}
		for w.More() {
			r := rng.IntN(100)
			var ok bool
			switch {
			case lead != nil && r < 40:
				lead.p++
				ok = proclaim(lead, lead.p)
			case lead != nil && r < 55:
				ok = leader(lead.key)
			case lead != nil:
				if ok = resign(lead, false); ok {
					lead.cancel()
					resigned = append(resigned, lead)
					lead = nil
				}
			case len(resigned) > 0 && r < 10:
				l := resigned[rng.IntN(len(resigned))]
				if rng.IntN(2) == 0 {
					ok = proclaim(l, l.p+1000)
				} else {
					ok = resign(l, true)
				}
			case r < 30:
				ok = leader(rng.IntN(len(mine)))
			default:
				ok = campaign(rng.IntN(len(mine)))
			}
			if !ok {
				return
			}
		}
		if lead != nil && resign(lead, false) { // resign what is still led, recorded like the rest
			lead.cancel()
		}
	}, func(w *Worker) {
		start = w.start
		settleAll(t, len(probes[0]), func(key int) (bool, bool) {
			in := electionInput{key: key, op: elProbe, hold: int(holds.Add(1)), client: w.Client}
			unlock := in
			unlock.op = elProbeUnlock
			return probeElection(t, w, probes[0][key], in, unlock)
		})
	})
	stopObservers()
	watchers.Wait()
	if failed != nil {
		t.Errorf("an observer: %v", failed)
	}
	for _, r := range received {
		i := r.in.key*ElectionObservers + r.in.observer
		history = append(history, porcupine.Operation{ClientId: len(clients)*Workers + 1 + i, Input: r.in, Output: r.out,
			Call: observing[i].Sub(start).Nanoseconds(), Return: r.at.Sub(start).Nanoseconds()})
	}
	return history
}

// probeElection is one probe of settleAll: the fair lock of an election's name taken without
// wait, recorded as try, and when won released again, recorded as unlock.
func probeElection(t *testing.T, w *Worker, l Locker, try, unlock electionInput) (won, ok bool) {
	var ctx context.Context
	if !record(t, w, try, func() (out electionOutput, err error) {
		ctx, out.ok, err = l.TryLock(context.Background())
		return out, err
	}) {
		return false, false
	}
	if ctx == nil {
		return false, true
	}
	return true, record(t, w, unlock, func() (electionOutput, error) { return electionOutput{}, l.Unlock(ctx) })
}

// LogElectionOutcomes logs how many operations of each kind the history has and how they
// ended, to show the run contended.
func LogElectionOutcomes(t *testing.T, history []porcupine.Operation) {
	t.Helper()
	n := map[string]int{}
	for _, op := range history {
		in, out := op.Input.(electionInput), op.Output.(electionOutput)
		switch in.op {
		case elCampaign:
			switch {
			case out.ok:
				n["led"]++
				if op.Return-op.Call >= time.Millisecond.Nanoseconds() {
					n["waited"]++
				}
			case in.wait.how == waitDeadline:
				n["deadline"]++
			default:
				n["cancelled"]++
			}
		case elProclaim, elResign:
			kind := "proclaim"
			if in.op == elResign {
				kind = "resign"
			}
			if out.notOwner {
				kind += " notOwner"
			}
			n[kind]++
		case elLeader:
			if out.ok {
				n["leader"]++
			} else {
				n["nobody"]++
			}
		case elObserved:
			n["received"]++
		}
	}
	t.Logf("Campaign: %d led (%d of them 1ms or more after the call), %d ended by their deadline, %d cancelled; Proclaim: %d, %d ErrNotOwner; "+
		"Resign: %d, %d ErrNotOwner; Leader: %d named one, %d nobody; observers' receptions: %d",
		n["led"], n["waited"], n["deadline"], n["cancelled"], n["proclaim"], n["proclaim notOwner"],
		n["resign"], n["resign notOwner"], n["leader"], n["nobody"], n["received"])
}
