package election_test

import (
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/election"
	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/testkit/lintest"
	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// Elections are linearizable against the specification with the fair lock's queue and the
// leader (lintest.ElectionModel): goroutines of three Clients campaign on two elections with
// contexts that reach their deadline or are cancelled after 1-20ms, proclaim, read the leader
// and resign, and proclaim or resign with leading contexts that resigned already, while two
// observers of each election receive its changes. Each Campaign is checked as its join and its
// outcome (lintest.SplitElectionWaits), so that a candidate whose context ended may have been
// handed the lock, and even have led for a moment, and passed it on as it left. The leading
// contexts' intervals, from the Campaign's return to the Resign's call, are checked not to
// overlap on the raw history too. The default leases are renewed by the watchdog and the
// waiter timeout (5s) is beyond the run: no expiry, no dropped waiters. The run leaves no key
// without a TTL.
func TestElectionIsLinearizable(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		var clients []*aqs.Client
		for range lintest.Clients {
			clients = append(clients, newClient(t, lintest.OwnRedis(t, rdb)))
		}
		names := make([]string, lintest.Elections)
		for k := range names {
			names[k] = fmt.Sprintf("%s-%d", redistest.Name(t), k)
		}
		elections := make([][]*election.Election, len(clients))
		probes := make([][]lintest.Locker, len(clients))
		for c, client := range clients {
			for _, name := range names {
				e, err := election.New(client, name)
				if err != nil {
					t.Fatal(err)
				}
				f, err := fair.New(client, name)
				if err != nil {
					t.Fatal(err)
				}
				elections[c] = append(elections[c], e)
				probes[c] = append(probes[c], f)
			}
		}
		history := lintest.RunElections(t, clients, elections, probes)
		if t.Failed() {
			return
		}
		lintest.LogElectionOutcomes(t, history)
		lintest.CheckLeadingIntervals(t, history)
		lintest.Check(t, lintest.ElectionModel, lintest.SplitElectionWaits(history))
		for k, name := range names {
			redistest.AssertNoKeyWithoutTTL(t, rdb, name, elections[0][k].Keys()[0])
		}
	})
}
