package lintest

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/redaqs/aqs/election"
)

// Hand-written histories of one election, times in ns. Candidates 1 (A), 2 (B), 3 (C);
// tokens 100, 200, 300.

func eop(call, ret int64, in electionInput, out electionOutput) porcupine.Operation {
	return porcupine.Operation{Input: in, Call: call, Output: out, Return: ret}
}

// eCampaign is a Campaign whose context is cancelled at end, as RunElections records it: it
// led with token, or (token 0) its context ended.
func eCampaign(call, ret, end int64, hold int, token int64) porcupine.Operation {
	w := Wait{how: waitCancel, d: time.Duration(end - call), endAfter: end}
	out := electionOutput{}
	if token != 0 {
		out = electionOutput{ok: true, hold: hold, token: token}
	}
	return eop(call, ret, electionInput{op: elCampaign, hold: hold, wait: w}, out)
}

func eProclaim(call, ret int64, hold, p int, notOwner bool) porcupine.Operation {
	return eop(call, ret, electionInput{op: elProclaim, hold: hold, p: p}, electionOutput{notOwner: notOwner})
}

func eResign(call, ret int64, hold int, notOwner bool) porcupine.Operation {
	return eop(call, ret, electionInput{op: elResign, hold: hold}, electionOutput{notOwner: notOwner})
}

// eLeader is a Leader that named hold with its p-th value and token, or nobody (hold 0).
func eLeader(call, ret int64, hold, p int, token int64) porcupine.Operation {
	out := electionOutput{}
	if hold != 0 {
		out = electionOutput{ok: true, hold: hold, p: p, token: token}
	}
	return eop(call, ret, electionInput{op: elLeader}, out)
}

// eObserved is observer o's k-th reception, of hold's p-th value with token.
func eObserved(call, ret int64, o, k, hold, p int, token int64) porcupine.Operation {
	return eop(call, ret, electionInput{op: elObserved, observer: o, k: k}, electionOutput{ok: true, hold: hold, p: p, token: token})
}

func electionLinearizable(history ...porcupine.Operation) bool {
	return porcupine.CheckOperations(ElectionModel, SplitElectionWaits(history))
}

// A leads, proclaims and resigns; B, waiting meanwhile, is handed the lock and leads; Leader
// and an observer see each in turn.
func TestElectionModelAcceptsAnOrdinaryRun(t *testing.T) {
	if !electionLinearizable(
		eCampaign(0, 2, 1000, 1, 100),
		eCampaign(3, 30, 1000, 2, 200),
		eLeader(4, 5, 1, 0, 100),
		eProclaim(6, 7, 1, 1, false),
		eLeader(8, 9, 1, 1, 100),
		eResign(10, 11, 1, false),
		eLeader(31, 32, 2, 0, 200),
		eResign(33, 34, 2, false),
		eLeader(35, 36, 0, 0, 0),
		eObserved(-5, 3, 0, 1, 1, 0, 100),
		eObserved(-5, 12, 0, 2, 1, 1, 100),
		eObserved(-5, 40, 0, 3, 2, 0, 200),
		eObserved(-5, 8, 1, 1, 1, 1, 100), // observer 1 missed A's first value
	) {
		t.Fatal("rejected")
	}
}

// B's Campaign returns leading before A, which leads, resigned: two leaders.
func TestElectionModelRejectsTwoLeaders(t *testing.T) {
	if electionLinearizable(
		eCampaign(0, 1, 1000, 1, 100),
		eCampaign(2, 3, 1000, 2, 200),
		eResign(5, 6, 1, false),
		eResign(7, 8, 2, false),
	) {
		t.Fatal("accepted two leaders")
	}
}

// Leader reports the leader's latest value: not a resigned leader's, nor a value it
// proclaimed over, nor nobody while it leads.
func TestElectionModelRejectsAStaleLeader(t *testing.T) {
	base := []porcupine.Operation{
		eCampaign(0, 1, 1000, 1, 100),
		eProclaim(2, 3, 1, 1, false),
		eResign(10, 11, 1, false),
	}
	for name, read := range map[string]porcupine.Operation{
		"a resigned leader":             eLeader(12, 13, 1, 1, 100),
		"a value proclaimed over":       eLeader(4, 5, 1, 0, 100),
		"nobody while A leads":          eLeader(4, 5, 0, 0, 0),
		"A with another token":          eLeader(4, 5, 1, 1, 101),
		"A's value with a wrong Client": eop(4, 5, electionInput{op: elLeader}, electionOutput{ok: true, hold: 1, p: 1, token: 100, wrongClient: true}),
	} {
		if electionLinearizable(append(base, read)...) {
			t.Errorf("accepted Leader naming %s", name)
		}
	}
	if !electionLinearizable(append(base, eLeader(4, 5, 1, 1, 100), eLeader(12, 13, 0, 0, 0))...) {
		t.Error("rejected the current value, then nobody")
	}
}

// A later leader's token is greater than an earlier one's.
func TestElectionModelRejectsATokenThatDoesNotIncrease(t *testing.T) {
	h := func(second int64) []porcupine.Operation {
		return []porcupine.Operation{
			eCampaign(0, 1, 1000, 1, 100),
			eResign(2, 3, 1, false),
			eCampaign(4, 5, 1000, 2, second),
		}
	}
	if electionLinearizable(h(100)...) || electionLinearizable(h(50)...) {
		t.Fatal("accepted a token not greater than the previous leader's")
	}
	if !electionLinearizable(h(101)...) {
		t.Fatal("rejected a greater token")
	}
}

// B's Campaign fails as its context ends (at 20), having been handed the lock by A's
// resignation and led for a moment: a Leader saw it. Nobody leads once it returned, and C,
// arriving after, leads with a greater token. Had B's Campaign returned before the Leader
// began, B could not have been leading then.
func TestElectionModelAcceptsACampaignThatLedAndFailed(t *testing.T) {
	h := func(ret int64) []porcupine.Operation {
		return []porcupine.Operation{
			eCampaign(0, 1, 1000, 1, 100),
			eCampaign(2, ret, 7, 2, 0),
			eResign(5, 6, 1, false),
			eLeader(10, 11, 2, 0, 200),
			eLeader(26, 27, 0, 0, 0),
			eCampaign(28, 29, 1000, 3, 300),
		}
	}
	if !electionLinearizable(h(25)...) {
		t.Fatal("rejected")
	}
	if electionLinearizable(h(8)...) {
		t.Fatal("accepted a failed Campaign seen leading after it returned")
	}
}

// An observer sees changes in the order they happened, each once, and only once it happened.
func TestElectionModelRejectsAnObserverOutOfOrder(t *testing.T) {
	base := []porcupine.Operation{
		eCampaign(0, 1, 1000, 1, 100),
		eProclaim(2, 3, 1, 1, false),
		eResign(10, 11, 1, false),
	}
	for name, recv := range map[string][]porcupine.Operation{
		"backwards":          {eObserved(-5, 4, 0, 1, 1, 1, 100), eObserved(-5, 5, 0, 2, 1, 0, 100)},
		"twice":              {eObserved(-5, 4, 0, 1, 1, 1, 100), eObserved(-5, 5, 0, 2, 1, 1, 100)},
		"before it was made": {eObserved(-5, 1, 0, 1, 1, 1, 100)},
		"never made":         {eObserved(-5, 20, 0, 1, 1, 2, 100)},
		"with another token": {eObserved(-5, 20, 0, 1, 1, 1, 99)},
	} {
		if electionLinearizable(append(base, recv...)...) {
			t.Errorf("accepted an observer receiving a change %s", name)
		}
	}
	// Received late, after the leader resigned: legal, the change was current before.
	if !electionLinearizable(append(base, eObserved(-5, 4, 0, 1, 1, 0, 100), eObserved(-5, 50, 0, 2, 1, 1, 100))...) {
		t.Error("rejected changes received late")
	}
}

// A Proclaim or a Resign with a leading context that resigned fails with ErrNotOwner; one
// that succeeds is rejected.
func TestElectionModelRejectsAStaleLeadingContext(t *testing.T) {
	base := []porcupine.Operation{eCampaign(0, 1, 1000, 1, 100), eResign(2, 3, 1, false)}
	if !electionLinearizable(append(base, eProclaim(4, 5, 1, 1, true), eResign(6, 7, 1, true))...) {
		t.Fatal("rejected ErrNotOwner")
	}
	if electionLinearizable(append(base, eProclaim(4, 5, 1, 1, false))...) {
		t.Fatal("accepted a proclaim after the resignation")
	}
	if electionLinearizable(append(base, eResign(4, 5, 1, false))...) {
		t.Fatal("accepted a second resignation")
	}
}

// The leading intervals of one election overlap when B returned leading before A's Resign
// was called, and not when B returned after it.
func TestLeadingOverlapsFindsAnOverlap(t *testing.T) {
	a, resignA := eCampaign(0, 1, 1000, 1, 100), eResign(5, 6, 1, false)
	resignB := eResign(7, 8, 2, false)
	if n, problems := leadingOverlaps([]porcupine.Operation{a, eCampaign(2, 3, 1000, 2, 200), resignA, resignB}); n != 2 || len(problems) != 1 {
		t.Fatalf("%d intervals, problems %v", n, problems)
	}
	if n, problems := leadingOverlaps([]porcupine.Operation{a, eCampaign(2, 6, 1000, 2, 200), resignA, resignB}); n != 2 || len(problems) != 0 {
		t.Fatalf("%d intervals, problems %v", n, problems)
	}
	if _, problems := leadingOverlaps([]porcupine.Operation{a}); len(problems) != 1 {
		t.Fatalf("a leader that never resigned: problems %v", problems)
	}
}

// leadershipOutput reads the value's hold and proclaim, and tells a Leadership of another
// Client.
func TestLeadershipOutput(t *testing.T) {
	ids := []string{"c0", "c1"}
	out, err := leadershipOutput(election.Leadership{Value: electionValue(1, 7, 3), Token: 5, Client: "c1"}, ids)
	if err != nil || out != (electionOutput{ok: true, hold: 7, p: 3, token: 5}) {
		t.Fatalf("%+v %v", out, err)
	}
	out, err = leadershipOutput(election.Leadership{Value: electionValue(0, 7, 3), Token: 5, Client: "c1"}, ids)
	if err != nil || !out.wrongClient {
		t.Fatalf("%+v %v", out, err)
	}
	for _, v := range []string{"", "x", "1.2", "5.1.1", "a.b.c"} {
		if _, err := leadershipOutput(election.Leadership{Value: v}, ids); err == nil {
			t.Errorf("value %q accepted", v)
		}
	}
}
