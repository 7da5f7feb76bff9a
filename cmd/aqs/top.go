package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs/internal/core"
)

const topSynopsis = `Shows every primitive under the key prefix, refreshed every --interval until Ctrl-C
(or once with --once): the names with the longest queues first, then the Clients that
hold or wait, those that stopped showing signs of life marked stale. It only reads:
it finds the names with SCAN (never KEYS) on every master, then reads each name as
aqs inspect does, in one atomic snapshot timed by the server's clock.

Names, sorted by queue length (longest first), then by name:
  NAME         the name (quoted when it holds spaces or control bytes)
  KIND         lock (a reentrant or fair lock, or a read-write lock's writer alone),
               election (a lock whose holder leads the election of the name),
               rwlock, semaphore (counting), leased-semaphore, latch, or "?" for a
               key at the name that no aqs primitive would write
  HELD         locks: the holds (1, or a read-write lock's readers: "3r", its writer:
               "w"); semaphores: permits taken/total; a latch: its count
  HOLDERS      the holders' Client ids, shortened to their first 8 characters
  QUEUE        live waiters
  OLDEST WAIT  how long this top has seen the longest-waiting live waiter queued:
               the queue does not store when a waiter joined (only its liveness
               deadline, which its heartbeats push on), so this is a lower bound that
               grows from top's first look; "-" on the first refresh and with --once
  LEASE LEFT   the shortest remaining lease among the holders
Clients, stale first, then by holds and waits:
  CLIENT, HOLDS, WAITS   the Client id, its holds and its waiters over all the names
  LAST SEEN    how long ago the Client last renewed or heartbeat, derived from what
               Redis stores: for a waiter, its liveness deadline less the waiter timeout
               (--waiter-timeout); for a holder, its lease end less the lease
               (--lease); the most recent over the Client's holds and waits
  STATUS       stale when every hold and wait of the Client missed two beats: last seen
               more than two thirds of the waiter timeout (waiters, which heartbeat
               every third of it) or of the lease (holders, renewed every third of it)
               ago. A Client that died shows as stale before its waiters are dropped
               and its leases end.
The derivation assumes the Clients use the --lease and --waiter-timeout given (the
library's defaults unless said): a Client with a shorter lease, or a hold with a fixed
lease (aqs.WithLease, never renewed), looks staler than it is. Counting semaphores
record no holders: their permits count in HELD only.

--json (with --once) prints one JSON object:
  {"prefix", "server_time_ms", "names" (how many were found), "rows": [{"name",
   "kind", "held": bool, "holds", "holder_clients": [...], "permits" (semaphores:
   {"taken", "total"}), "count" (latch), "queue", "head": {"hold", "client",
   "deadline_in_ms"} (the next waiter served), "lease_left_ms" (absent: no holder
   with a lease), "leader": {"hold", "token", "value"}, "stale_entries", "error"
   (kind "?")}], "more_rows" (rows past --limit), "clients": [{"client", "holds",
   "waits", "last_seen_ms" (absent: unknown), "stale": bool}], "more_clients"}`

// topDefaults are the library's defaults that the Clients' liveness is derived with.
const (
	topDefaultLease    = 30 * time.Second // aqs.WithWatchdogTimeout's default
	topDefaultInterval = time.Second
	topDefaultLimit    = 50
	topMinInterval     = 10 * time.Millisecond
	topScanCount       = 1000
)

// topConfig is what a refresh needs.
type topConfig struct {
	prefix        string
	limit         int
	lease         time.Duration
	waiterTimeout time.Duration
}

func runTop(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "top", topSynopsis)
	af := addAdminFlags(fs)
	once := fs.Bool("once", false, "print one table and exit")
	asJSON := fs.Bool("json", false, "with --once: print one JSON object instead of text")
	limit := fs.Int("limit", topDefaultLimit, "show at most `N` names and N Clients")
	interval := fs.Duration("interval", topDefaultInterval, "time between refreshes")
	lease := fs.Duration("lease", topDefaultLease, "the Clients' lease (watchdog timeout), to derive when holders last renewed")
	waiterTimeout := fs.Duration("waiter-timeout", core.DefaultWaiterTimeout, "the primitives' waiter timeout, to derive when waiters last heartbeat")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case *limit < 1:
		return usagef("--limit must be at least 1, not %d", *limit)
	case *interval < topMinInterval:
		return usagef("--interval must be at least %v, not %v", topMinInterval, *interval)
	case *lease <= 0:
		return usagef("--lease must be positive, not %v", *lease)
	case *waiterTimeout <= 0:
		return usagef("--waiter-timeout must be positive, not %v", *waiterTimeout)
	case *asJSON && !*once:
		return usagef("--json prints one object: give --once with it")
	}
	a, err := openAdmin(ctx, e, af)
	if err != nil {
		return err
	}
	defer a.Close()
	cfg := topConfig{prefix: a.prefix, limit: *limit, lease: *lease, waiterTimeout: *waiterTimeout}
	w := newTopWatch()

	if *once {
		v, err := w.refresh(ctx, a.rdb, cfg)
		if err != nil {
			return err
		}
		if *asJSON {
			enc := json.NewEncoder(e.stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(v)
		}
		printTop(e.stdout, a.addr, v)
		return nil
	}

	ansi := isTerminal(e.stdout)
	tick := time.NewTicker(*interval)
	defer tick.Stop()
	for {
		v, err := w.refresh(ctx, a.rdb, cfg)
		if ctx.Err() != nil {
			return nil // Ctrl-C: the view ends there
		}
		if ansi {
			fmt.Fprint(e.stdout, "\x1b[H\x1b[2J") // home, then clear the screen
		}
		if err != nil {
			// A live view outlasts a Redis that is briefly away: it says so and tries again.
			fmt.Fprintf(e.stdout, "aqs top: %v (trying again in %v)\n", err, *interval)
		} else {
			printTop(e.stdout, a.addr, v)
		}
		if !ansi {
			fmt.Fprintln(e.stdout)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// topView is one refresh: the rows of the names and the Clients.
type topView struct {
	Prefix       string      `json:"prefix"`
	ServerTimeMS int64       `json:"server_time_ms"`
	Names        int         `json:"names"`
	Rows         []topRow    `json:"rows"`
	MoreRows     int         `json:"more_rows"`
	Clients      []topClient `json:"clients"`
	MoreClients  int         `json:"more_clients"`
	// observed: the oldest waits were observed over earlier refreshes (live mode).
	observed bool
}

// topRow is one name.
type topRow struct {
	Name          string      `json:"name"`
	Kind          string      `json:"kind"`
	Held          bool        `json:"held"`
	Holds         int         `json:"holds"`
	HolderClients []string    `json:"holder_clients"`
	Permits       *topPermits `json:"permits,omitempty"`
	Count         *int64      `json:"count,omitempty"`
	Queue         int         `json:"queue"`
	Head          *topHead    `json:"head,omitempty"`
	OldestWaitMS  *int64      `json:"oldest_wait_ms,omitempty"`
	LeaseLeftMS   *int64      `json:"lease_left_ms,omitempty"`
	Leader        *leaderInfo `json:"leader,omitempty"`
	StaleEntries  int         `json:"stale_entries"`
	Error         string      `json:"error,omitempty"`
	readers       int         // read holds of a read-write lock
	writer        bool        // a read-write lock's writer holds
	state         *nameState  // nil for a latch or a foreign key
}

// topPermits are a semaphore's permits in use.
type topPermits struct {
	Taken int64 `json:"taken"`
	Total int64 `json:"total"`
}

// topHead is the waiter the queue serves next.
type topHead struct {
	Hold         string `json:"hold"`
	Client       string `json:"client"`
	DeadlineInMS int64  `json:"deadline_in_ms"`
}

// topClient is one Client that holds or waits.
type topClient struct {
	Client     string `json:"client"`
	Holds      int    `json:"holds"`
	Waits      int    `json:"waits"`
	LastSeenMS *int64 `json:"last_seen_ms,omitempty"`
	Stale      bool   `json:"stale"`
}

// topWatch keeps what top learns over refreshes: when it first saw each waiter queued.
type topWatch struct {
	firstSeen map[string]int64 // "<base key> <hold>" -> server ms
	refreshes int
}

func newTopWatch() *topWatch { return &topWatch{firstSeen: map[string]int64{}} }

// refresh finds the names under the prefix and reads each.
func (w *topWatch) refresh(ctx context.Context, rdb redis.UniversalClient, cfg topConfig) (*topView, error) {
	names, err := scanNames(ctx, rdb, cfg.prefix)
	if err != nil {
		return nil, err
	}
	v := &topView{Prefix: cfg.prefix, Names: 0, Rows: []topRow{}, Clients: []topClient{}, observed: w.refreshes > 0}
	w.refreshes++
	seen := map[string]int64{}
	clients := map[string]*clientLife{}
	for _, name := range names {
		r, now, err := readTopRow(ctx, rdb, cfg.prefix, name)
		if err != nil {
			return nil, err
		}
		if r == nil {
			continue // nothing at the name (its keys went since the scan, or only a call's record)
		}
		v.Names++
		v.ServerTimeMS = max(v.ServerTimeMS, now)
		if st := r.state; st != nil {
			w.observe(r, st, seen, v.observed)
			lifeOf(clients, st, cfg)
		}
		v.Rows = append(v.Rows, *r)
	}
	w.firstSeen = seen
	slices.SortFunc(v.Rows, func(a, b topRow) int {
		if a.Queue != b.Queue {
			return b.Queue - a.Queue
		}
		return strings.Compare(a.Name, b.Name)
	})
	if len(v.Rows) > cfg.limit {
		v.MoreRows = len(v.Rows) - cfg.limit
		v.Rows = v.Rows[:cfg.limit]
	}
	for _, c := range clients {
		v.Clients = append(v.Clients, c.row())
	}
	slices.SortFunc(v.Clients, func(a, b topClient) int {
		switch {
		case a.Stale != b.Stale:
			if a.Stale {
				return -1
			}
			return 1
		case a.Holds+a.Waits != b.Holds+b.Waits:
			return (b.Holds + b.Waits) - (a.Holds + a.Waits)
		}
		return strings.Compare(a.Client, b.Client)
	})
	if len(v.Clients) > cfg.limit {
		v.MoreClients = len(v.Clients) - cfg.limit
		v.Clients = v.Clients[:cfg.limit]
	}
	return v, nil
}

// observe records when each live waiter of the row was first seen (into seen, carried over from
// the previous refresh) and sets the row's oldest observed wait.
func (w *topWatch) observe(r *topRow, st *nameState, seen map[string]int64, observed bool) {
	var oldest int64 = -1
	for _, q := range st.Waiters {
		k := st.Key + " " + q.Hold
		first, ok := w.firstSeen[k]
		if !ok {
			first = st.ServerTimeMS
		}
		seen[k] = first
		oldest = max(oldest, st.ServerTimeMS-first)
	}
	if observed && oldest >= 0 {
		r.OldestWaitMS = &oldest
	}
}

// readTopRow reads one name into a row, with the server time of its snapshot; a nil row when
// nothing is at the name.
func readTopRow(ctx context.Context, rdb redis.UniversalClient, prefix, name string) (*topRow, int64, error) {
	s, err := readSnapshot(ctx, rdb, prefix, name)
	if err != nil {
		return nil, 0, err
	}
	st, err := s.classify()
	var foreign *errForeign
	switch {
	case isNothing(err):
		return nil, s.now, nil
	case errors.As(err, &foreign):
		r := &topRow{Name: name, Kind: "?", HolderClients: []string{}, Error: err.Error()}
		if n, ok := latchCount(s); ok {
			*r = topRow{Name: name, Kind: "latch", HolderClients: []string{}, Count: &n}
		}
		return r, s.now, nil
	case err != nil:
		return nil, s.now, err
	}
	return rowOf(st), s.now, nil
}

// latchCount returns the count of a count-down latch: a base key holding a number and no
// companion key.
func latchCount(s *nameSnapshot) (int64, bool) {
	if s.base.typ != "string" {
		return 0, false
	}
	for _, k := range s.comp {
		if k.exists() {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s.base.str, 10, 64)
	return n, err == nil && n >= 0
}

// rowOf sums up an inspected name.
func rowOf(st *nameState) *topRow {
	r := &topRow{Name: st.Name, Kind: st.Kind, Held: st.Held, Holds: len(st.Holders), HolderClients: []string{},
		Queue: len(st.Waiters), Leader: st.Leader, StaleEntries: st.StaleEntries, state: st}
	if st.Leader != nil {
		r.Kind = "election"
	}
	if p := st.Permits; p != nil {
		r.Permits = &topPermits{Taken: p.Taken, Total: p.Total}
	}
	for _, h := range st.Holders {
		if !slices.Contains(r.HolderClients, h.Client) {
			r.HolderClients = append(r.HolderClients, h.Client)
		}
		switch h.Mode {
		case "read":
			r.readers++
		case "write":
			r.writer = true
		}
		if h.LeaseRemainingMS >= 0 && (r.LeaseLeftMS == nil || h.LeaseRemainingMS < *r.LeaseLeftMS) {
			left := h.LeaseRemainingMS
			r.LeaseLeftMS = &left
		}
	}
	if len(st.Waiters) > 0 {
		q := st.Waiters[0]
		r.Head = &topHead{Hold: q.Hold, Client: q.Client, DeadlineInMS: q.DeadlineInMS}
	}
	return r
}

// clientLife gathers a Client's holds and waits and its signs of life.
type clientLife struct {
	id           string
	holds, waits int
	lastSeen     int64 // the smallest age of a sign of life, ms; -1 while none is known
	live         bool  // some hold or wait has not missed two beats
}

// lifeOf adds the holds and waits of st to the Clients.
func lifeOf(clients map[string]*clientLife, st *nameState, cfg topConfig) {
	get := func(id string) *clientLife {
		c := clients[id]
		if c == nil {
			c = &clientLife{id: id, lastSeen: -1}
			clients[id] = c
		}
		return c
	}
	sign := func(c *clientLife, age int64, period time.Duration) {
		age = max(age, 0)
		if c.lastSeen < 0 || age < c.lastSeen {
			c.lastSeen = age
		}
		if age <= 2*period.Milliseconds() {
			c.live = true
		}
	}
	for _, h := range st.Holders {
		c := get(h.Client)
		c.holds++
		if h.LeaseRemainingMS >= 0 {
			// Renewed to a full lease every third of it: lease end - lease ≈ last renewal.
			sign(c, cfg.lease.Milliseconds()-h.LeaseRemainingMS, cfg.lease/3)
		}
	}
	for _, q := range st.Waiters {
		c := get(q.Client)
		c.waits++
		// Each heartbeat, every third of the waiter timeout, sets the deadline to a full
		// waiter timeout ahead: deadline - waiter timeout ≈ last heartbeat.
		sign(c, cfg.waiterTimeout.Milliseconds()-q.DeadlineInMS, cfg.waiterTimeout/3)
	}
}

func (c *clientLife) row() topClient {
	r := topClient{Client: c.id, Holds: c.holds, Waits: c.waits}
	if c.lastSeen >= 0 {
		seen := c.lastSeen
		r.LastSeenMS = &seen
		r.Stale = !c.live
	}
	return r
}

// scanNames returns the names under the prefix, sorted: it SCANs for the keys
// "<prefix>:{..." on every master and decodes each key's name (nameOfKey).
func scanNames(ctx context.Context, rdb redis.UniversalClient, prefix string) ([]string, error) {
	match := core.GlobEscape(prefix) + ":{*"
	var mu sync.Mutex
	names := map[string]bool{}
	scan := func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, match, topScanCount).Iterator()
		for iter.Next(ctx) {
			if name, ok := nameOfKey(prefix, iter.Val()); ok {
				mu.Lock()
				names[name] = true
				mu.Unlock()
			}
		}
		if err := iter.Err(); err != nil {
			return fmt.Errorf("scanning %s for %s: %w", c.Options().Addr, match, err)
		}
		return nil
	}
	var err error
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, scan)
	case *redis.Client:
		err = scan(ctx, c)
	default:
		err = fmt.Errorf("cannot scan the keys through a %T", rdb)
	}
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(names))
	for n := range names {
		out = append(out, n)
	}
	slices.Sort(out)
	return out, nil
}

var nameUnescaper = strings.NewReplacer("%25", "%", "%7B", "{", "%7D", "}")

// nameOfKey returns the name whose base key (internal/core/keys.go) the key is or starts with:
// "<prefix>:{<escaped name>}..." or, for a name with a hash tag of its own,
// "<prefix>:{<tag>}{<escaped name>}...". The name is checked by escaping it again: a key
// that no name would give is none of aqs's.
func nameOfKey(prefix, key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, prefix+":{")
	if !ok {
		return "", false
	}
	end := strings.IndexByte(rest, '}')
	if end < 0 {
		return "", false
	}
	esc := rest[:end]
	if after := rest[end+1:]; strings.HasPrefix(after, "{") {
		// "{<tag>}{<escaped name>}": the escaped name holds no brace.
		e := strings.IndexByte(after[1:], '}')
		if e < 0 {
			return "", false
		}
		esc = after[1 : 1+e]
	}
	name := nameUnescaper.Replace(esc)
	base, err := core.BaseKey(prefix, name)
	if err != nil || !strings.HasPrefix(key, base) {
		return "", false
	}
	if tail := key[len(base):]; tail != "" && !strings.HasPrefix(tail, ":") {
		return "", false
	}
	return name, true
}

// printTop prints the view as two tables.
func printTop(w io.Writer, addr string, v *topView) {
	stale := 0
	for _, c := range v.Clients {
		if c.Stale {
			stale++
		}
	}
	fmt.Fprintf(w, "aqs top: prefix %q at %s, %s: %d names, %d Clients (%d stale)\n", v.Prefix, addr,
		time.UnixMilli(v.ServerTimeMS).UTC().Format("15:04:05.000Z"), v.Names, len(v.Clients)+v.MoreClients, stale)
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tHELD\tHOLDERS\tQUEUE\tOLDEST WAIT\tLEASE LEFT")
	for _, r := range v.Rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", nameText(r.Name), r.Kind, heldText(r), holdersText(r),
			r.Queue, optMS(r.OldestWaitMS, "≥"), optMS(r.LeaseLeftMS, ""))
	}
	tw.Flush()
	if v.MoreRows > 0 {
		fmt.Fprintf(w, "(%d more names: --limit)\n", v.MoreRows)
	}
	if len(v.Clients) == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(tw, "CLIENT\tHOLDS\tWAITS\tLAST SEEN\tSTATUS")
	for _, c := range v.Clients {
		status := "live"
		switch {
		case c.LastSeenMS == nil:
			status = "-"
		case c.Stale:
			status = "STALE"
		}
		seen := "-"
		if c.LastSeenMS != nil {
			seen = ageText(*c.LastSeenMS) + " ago"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", c.Client, c.Holds, c.Waits, seen, status)
	}
	tw.Flush()
	if v.MoreClients > 0 {
		fmt.Fprintf(w, "(%d more Clients: --limit)\n", v.MoreClients)
	}
}

// nameText prints a name, quoted when it holds spaces or bytes a terminal would not show.
func nameText(name string) string {
	for _, r := range name {
		if unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return strconv.Quote(name)
		}
	}
	return name
}

// heldText is the HELD column.
func heldText(r topRow) string {
	switch {
	case r.Count != nil:
		return strconv.FormatInt(*r.Count, 10)
	case r.Permits != nil:
		return fmt.Sprintf("%d/%d", r.Permits.Taken, r.Permits.Total)
	case r.writer:
		return "w"
	case r.readers > 0:
		return strconv.Itoa(r.readers) + "r"
	case r.Kind == "?":
		return "-"
	}
	return strconv.Itoa(r.Holds)
}

// holdersText is the HOLDERS column: short Client ids.
func holdersText(r topRow) string {
	if len(r.HolderClients) == 0 {
		return "-"
	}
	const shown = 3
	var ids []string
	for _, c := range r.HolderClients[:min(len(r.HolderClients), shown)] {
		ids = append(ids, c[:min(len(c), 8)])
	}
	s := strings.Join(ids, ",")
	if n := len(r.HolderClients) - shown; n > 0 {
		s += fmt.Sprintf("+%d", n)
	}
	return s
}

// optMS prints an optional duration in ms, "-" when absent.
func optMS(ms *int64, mark string) string {
	if ms == nil {
		return "-"
	}
	return mark + ageText(*ms)
}

// ageText prints ms as a duration, to 0.1s from a second up.
func ageText(ms int64) string {
	d := time.Duration(ms) * time.Millisecond
	if d >= time.Second {
		d = d.Round(100 * time.Millisecond)
	}
	return d.String()
}
