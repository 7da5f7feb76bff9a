package main

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// The connections a cluster slice costs.
//
// Each slice of a cluster scenario is watched from the parent on a connection of its own to
// every master: INFO stats at the slice's start and stop give the connections the masters
// accepted meanwhile (total_connections_received), and CLIENT LIST at a quarter, a half and
// three quarters of the slice gives the pub/sub connections, and the shard channels they
// hold, of each process (connections carry their process's name: benchClientName). A
// Client that keeps at most one pub/sub connection per master and dials nothing in steady
// state shows at most 1 and 0.

// connSample is what the masters showed during one slice, master by master in slot order.
type connSample struct {
	dialled []int64 // connections accepted between the slice's start and stop
	pubsub  []int   // the most pub/sub connections one process held, over the samples
	chans   []int   // the most shard channels one process held subscribed, over the samples
	err     error
}

// connStats gathers a row's connection samples over the measured rounds.
type connStats struct {
	dialled []int64 // per master, summed over the rounds
	secs    float64 // the rounds' slices, together
	pubsub  []int   // per master, the most seen
	chans   []int
}

func (s *connStats) add(c connSample, slice time.Duration) {
	if s.dialled == nil {
		s.dialled = make([]int64, len(c.dialled))
		s.pubsub = make([]int, len(c.pubsub))
		s.chans = make([]int, len(c.chans))
	}
	for m := range c.dialled {
		s.dialled[m] += c.dialled[m]
		s.pubsub[m] = max(s.pubsub[m], c.pubsub[m])
		s.chans[m] = max(s.chans[m], c.chans[m])
	}
	s.secs += slice.Seconds()
}

// watchSamples are the points of a slice, as fractions of it, at which CLIENT LIST is read.
var watchSamples = []float64{0.25, 0.5, 0.75}

// watch watches the masters during the slice from start to stop, on the watchers'
// connections (dialled before, so they add nothing), and sends what it saw once stop is past.
// The pub/sub connections of the process whose connections are named skip are not counted
// (the parent's, when contender processes run the slice: its Client's channels may linger
// from an earlier scenario).
func (cb *clusterBench) watch(start, stop time.Time, skip string) <-chan connSample {
	out := make(chan connSample, 1)
	go func() {
		ctx := context.Background()
		nm := len(cb.watchers)
		s := connSample{dialled: make([]int64, nm), pubsub: make([]int, nm), chans: make([]int, nm)}
		defer func() { out <- s }()
		accepted := func() ([]int64, error) {
			n := make([]int64, nm)
			for m, w := range cb.watchers {
				info, err := w.InfoMap(ctx, "stats").Result()
				if err != nil {
					return nil, err
				}
				var v int64
				if _, err := fmt.Sscan(info["Stats"]["total_connections_received"], &v); err != nil {
					return nil, fmt.Errorf("INFO stats of %s: total_connections_received: %w", cb.masters[m], err)
				}
				n[m] = v
			}
			return n, nil
		}
		time.Sleep(time.Until(start))
		before, err := accepted()
		if err != nil {
			s.err = err
			return
		}
		for _, f := range watchSamples {
			time.Sleep(time.Until(start.Add(time.Duration(f * float64(stop.Sub(start))))))
			for m, w := range cb.watchers {
				list, err := w.ClientList(ctx).Result()
				if err != nil {
					s.err = err
					return
				}
				conns, chans := pubsubByClient(list)
				for name, k := range conns {
					if name == skip {
						continue
					}
					s.pubsub[m] = max(s.pubsub[m], k)
					s.chans[m] = max(s.chans[m], chans[name])
				}
			}
		}
		time.Sleep(time.Until(stop))
		after, err := accepted()
		if err != nil {
			s.err = err
			return
		}
		for m := range after {
			s.dialled[m] = after[m] - before[m]
		}
	}()
	return out
}

// pubsubByClient counts, in a CLIENT LIST reply, the pub/sub connections of each process of
// the benchmark (by connection name, see benchClientName) and the channels they hold: a
// connection with a subscription of any kind (sub, psub, ssub), or flagged P.
func pubsubByClient(list string) (conns, chans map[string]int) {
	conns, chans = map[string]int{}, map[string]int{}
	for _, line := range strings.Split(list, "\n") {
		f := map[string]string{}
		for _, kv := range strings.Fields(line) {
			if k, v, ok := strings.Cut(kv, "="); ok {
				f[k] = v
			}
		}
		if !strings.HasPrefix(f["name"], "aqs-bench-") {
			continue
		}
		subs := 0
		for _, k := range []string{"sub", "psub", "ssub"} {
			var v int
			fmt.Sscan(f[k], &v)
			subs += v
		}
		if subs > 0 || strings.Contains(f["flags"], "P") {
			conns[f["name"]]++
			chans[f["name"]] += subs
		}
	}
	return conns, chans
}

// writeConns writes a cluster section's connection counts.
func writeConns(b *strings.Builder, rows []row) {
	b.WriteString("\nConnections, master by master in slot order (a / b / c). Pub/sub: the most pub/sub connections " +
		"one process's aqs Client held on the master, and the shard channels on them, at a quarter, a half and three " +
		"quarters of each measured slice (aqs rows only: the Client's channels linger 2s after use, into the next rows' " +
		"slices). Dialled: connections the master accepted during the measured slices, per second, from every process.\n\n")
	b.WriteString("| Implementation | pub/sub connections per Client | shard channels per Client | dialled per second |\n")
	b.WriteString("|---|--:|--:|--:|\n")
	join := func(xs []string) string { return strings.Join(xs, " / ") }
	isAQS := func(i int) bool { return strings.HasPrefix(clusterImplNames[i], "aqs ") }
	for i, r := range rows {
		c := r.conns
		if c == nil || len(r.rates) == 0 || c.secs == 0 {
			continue
		}
		var ps, ch, dl []string
		for m := range c.dialled {
			ps = append(ps, fmt.Sprint(c.pubsub[m]))
			ch = append(ch, fmt.Sprint(c.chans[m]))
			if c.dialled[m] == 0 {
				dl = append(dl, "0")
			} else {
				dl = append(dl, fmtRate(float64(c.dialled[m])/c.secs))
			}
		}
		if !isAQS(i) {
			ps, ch = []string{"—"}, []string{"—"}
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", clusterImplNames[i], join(ps), join(ch), join(dl))
	}
}
