package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

const inspectSynopsis = `Shows what is at NAME: which primitive (lock, read-write lock, counting or leased
semaphore), its holders with their hold counts, remaining leases and fencing tokens,
its wait queue in order with positions and liveness deadlines, and a semaphore's
permits. It only reads, in one atomic snapshot; times are measured on the server's
clock. It fails (status 1) when nothing is at NAME, which is also what a free lock
looks like, or when NAME holds a key that no aqs primitive would.

A reentrant and a fair lock look alike in Redis (one value, one queue): kind "lock".
So does a read-write lock's writer while nothing else of its lock exists (no reader,
no waiter), and an election, whose lock is the fair lock of its name: its leader is
shown beside the holder.

--json prints one JSON object. This release changes its shape: the kinds
"reentrant-lock" and "fair-lock" and the fields "reserved_for", "turns" and
"unlisted_waiters" are gone, and a read-write lock's waiters are listed in order.
This shape is stable from now on (fields may be added, none removed):
  {"name", "key", "kind": "lock" | "rwlock" | "semaphore" | "leased-semaphore",
   "server_time_ms", "held": bool,
   "holders": [{"hold", "client", "mode": "exclusive" | "write" | "read" | "permit",
                "count", "permits" (leased permits), "token": int or null,
                "lease_remaining_ms" (-1: no expiry)}],
   "waiters": [{"position" (from 1, in the order the queue serves them), "hold",
                "client", "mode": "exclusive" | "read" | "write" | "acquire",
                "permits", "lease_ms" (the lease it will have), "deadline_in_ms"
                (dropped as dead then, unless its client is heard of)}],
   "stale_entries" (entries whose time passed, dropped on the next use),
   "permits" (semaphores only): {"set": bool, "total", "available", "taken"},
   "leader" (while the lock's holder leads the election of NAME): {"hold", "token",
            "value"}}`

func runInspect(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "inspect NAME", inspectSynopsis)
	af := addAdminFlags(fs)
	asJSON := fs.Bool("json", false, "print one JSON object instead of text")
	name, err := parseWithName(fs, args)
	if err != nil {
		return err
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
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	}
	printState(e.stdout, st)
	return nil
}

// printState prints st as text: a headline, then a table per kind of entry.
func printState(w io.Writer, st *nameState) {
	fmt.Fprintln(w, stateHeadline(st))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	table := func(title string, header string, rows [][]string) {
		if len(rows) == 0 {
			return
		}
		fmt.Fprintf(tw, "%s\n  %s\n", title, header)
		for _, r := range rows {
			fmt.Fprintf(tw, "  %s\n", strings.Join(r, "\t"))
		}
	}
	var excl, readers, permits [][]string
	for _, h := range st.Holders {
		switch h.Mode {
		case "read":
			readers = append(readers, []string{h.Hold, strconv.FormatInt(h.Count, 10), leaseText(h.LeaseRemainingMS)})
		case "permit":
			permits = append(permits, []string{h.Hold, strconv.FormatInt(h.Permits, 10), leaseText(h.LeaseRemainingMS)})
		default:
			excl = append(excl, []string{h.Hold, strconv.FormatInt(h.Count, 10), tokenText(h.Token), leaseText(h.LeaseRemainingMS)})
		}
	}
	title := "holder"
	if st.Kind == primRW {
		title = "writer"
	}
	table(title, "HOLD\tCOUNT\tTOKEN\tLEASE LEFT", excl)
	if l := st.Leader; l != nil {
		table("leader (election)", "HOLD\tTOKEN\tVALUE", [][]string{{l.Hold, strconv.FormatInt(l.Token, 10), strconv.Quote(l.Value)}})
	}
	table("readers", "HOLD\tCOUNT\tLEASE LEFT", readers)
	table("leased permits", "PERMIT\tPERMITS\tLEASE LEFT", permits)

	var queue [][]string
	for _, q := range st.Waiters {
		switch st.Kind {
		case primRW:
			queue = append(queue, []string{strconv.Itoa(q.Position), q.Hold, q.Mode, msText(q.LeaseMS), msText(q.DeadlineInMS)})
		case primSemaphore:
			queue = append(queue, []string{strconv.Itoa(q.Position), q.Hold, strconv.FormatInt(q.Permits, 10), msText(q.DeadlineInMS)})
		case primLeased:
			queue = append(queue, []string{strconv.Itoa(q.Position), q.Hold, strconv.FormatInt(q.Permits, 10), msText(q.LeaseMS), msText(q.DeadlineInMS)})
		default:
			queue = append(queue, []string{strconv.Itoa(q.Position), q.Hold, msText(q.LeaseMS), msText(q.DeadlineInMS)})
		}
	}
	switch st.Kind {
	case primRW:
		table("queue (served in this order)", "POS\tHOLD\tMODE\tLEASE\tDEADLINE IN", queue)
	case primSemaphore:
		table("queue (served in this order)", "POS\tHOLD\tPERMITS\tDEADLINE IN", queue)
	case primLeased:
		table("queue (served in this order)", "POS\tHOLD\tPERMITS\tLEASE\tDEADLINE IN", queue)
	default:
		table("queue (served in this order)", "POS\tHOLD\tLEASE\tDEADLINE IN", queue)
	}
	tw.Flush()

	for _, n := range stateNotes(st) {
		fmt.Fprintln(w, n)
	}
}

// stateHeadline is the first line of the text: the kind, the name and key, and the state in short.
func stateHeadline(st *nameState) string {
	s := fmt.Sprintf("%s %q (key %s): %s", primTitle[st.Kind], st.Name, st.Key, heldStatus(st))
	if n := len(st.Waiters); n > 0 {
		s += fmt.Sprintf("; %d waiting", n)
	}
	return s
}

// heldStatus says in a few words whether and how st is held.
func heldStatus(st *nameState) string {
	switch {
	case st.Permits != nil && !st.Permits.Set:
		return "permits not set"
	case st.Kind == primSemaphore:
		return fmt.Sprintf("%d of %d permits taken, %d available", st.Permits.Taken, st.Permits.Total, st.Permits.Available)
	case st.Kind == primLeased:
		return fmt.Sprintf("%d of %d permits leased, %d available", st.Permits.Taken, st.Permits.Total, st.Permits.Available)
	case !st.Held:
		return "free"
	}
	return "held by " + holderNames(st)
}

// holderNames names the holds of a held lock.
func holderNames(st *nameState) string {
	var readers []string
	for _, h := range st.Holders {
		switch h.Mode {
		case "read":
			readers = append(readers, h.Hold)
		case "write":
			return "writer " + h.Hold
		default:
			return h.Hold
		}
	}
	const shown = 3
	list := strings.Join(readers[:min(len(readers), shown)], ", ")
	if len(readers) > shown {
		list += fmt.Sprintf(" and %d more", len(readers)-shown)
	}
	if len(readers) == 1 {
		return "reader " + list
	}
	return fmt.Sprintf("%d readers (%s)", len(readers), list)
}

// stateNotes are what the tables do not say.
func stateNotes(st *nameState) []string {
	var out []string
	switch st.Kind {
	case primLock:
		out = append(out, "(a reentrant or a fair lock, which look alike, or a read-write lock's writer while nothing else of its lock exists)")
		if len(st.Waiters) > 0 {
			out = append(out, "(a reentrant lock's release may hand it to a waiter of the holder's own Client before the head: see package reentrant)")
		}
	case primSemaphore:
		out = append(out, "(counting permits have no owner: who took them is not recorded)")
	}
	if st.StaleEntries > 0 {
		out = append(out, fmt.Sprintf("%d stale entries (waiters that gave up or died, leases that ran out): dropped on the next use", st.StaleEntries))
	}
	return out
}

// msText prints a duration in ms, as time.Duration does.
func msText(ms int64) string { return (time.Duration(ms) * time.Millisecond).String() }

// leaseText prints a remaining lease; -1 is a key without expiry.
func leaseText(ms int64) string {
	if ms < 0 {
		return "no expiry"
	}
	return msText(ms)
}

func tokenText(t *int64) string {
	if t == nil {
		return "-"
	}
	return strconv.FormatInt(*t, 10)
}
