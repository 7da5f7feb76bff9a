package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/redaqs/aqs"
)

const verifySynopsis = `Checks a deployment the way the library relies on it, and explains each finding
with its fix: the server and its version; the topology (a master, not a replica; on
Redis Cluster, every slot served); eviction (maxmemory with any maxmemory-policy but
noeviction lets the server evict a lock's key: a second holder gets in); persistence
(what a restart loses); the replicas, whether WAIT is allowed, and what
--replica-sync would need; that every script loads, and that the ACL lets the user
run the scripts' commands on the prefix's keys, publish and subscribe on its
channels; the round trip and the server clock's pace. Then a drill: two Clients
contend on scratch names of a fair lock (mutual exclusion, FIFO order) and of a
semaphore (at most its permits at once). It writes only under the scratch names
"<prefix>:{aqs-verify-<random>...}" and deletes them before it exits.

Each finding is PASS (as the library assumes), WARN (the guarantees hold, with a
limit worth knowing, or it could not be checked), FAIL (a guarantee does not hold
here, or the library cannot work here) or SKIP (an earlier finding keeps it from
running).

Exit status: 0 when no finding fails, 1 when one does, 2 when verify could not run
(a bad command line, an unreachable server).

--json prints the report as one JSON object:
  {"server", "topology", "prefix", "findings": [{"check", "severity" ("pass",
   "warn", "fail", "skip"), "server" (the master, when findings differ by master),
   "summary", "fix"}]}`

// exitVerifyFailed and exitVerifyCannotRun are verify's statuses besides 0.
const (
	exitVerifyFailed    = 1
	exitVerifyCannotRun = 2
)

func runVerify(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "verify", verifySynopsis)
	af := addAdminFlags(fs)
	asJSON := fs.Bool("json", false, "print the report as one JSON object")
	lease := fs.Duration("lease", 30*time.Second, "the Clients' watchdog timeout (aqs.WithWatchdogTimeout), which the round trip is judged against")
	syncReplicas := fs.Int("replica-sync", 0, "check for aqs.WithReplicaSync(`N`, --replica-timeout): N replicas must be connected and WAIT allowed")
	syncTimeout := fs.Duration("replica-timeout", 100*time.Millisecond, "with --replica-sync: the WAIT timeout")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	opts := []aqs.Option{aqs.WithKeyPrefix(af.prefix)}
	if *lease != 30*time.Second {
		opts = append(opts, aqs.WithWatchdogTimeout(*lease))
	}
	if *syncReplicas != 0 {
		opts = append(opts, aqs.WithReplicaSync(*syncReplicas, *syncTimeout))
	}
	a, err := openAdmin(ctx, e, af)
	if err != nil {
		var ue *usageError
		if errors.As(err, &ue) || ctx.Err() != nil {
			return err
		}
		return &exitStatus{code: exitVerifyCannotRun, err: err}
	}
	defer a.Close()
	r, err := aqs.VerifyServer(ctx, a.rdb, opts...)
	switch {
	case errors.Is(err, aqs.ErrInvalidArgument):
		return usagef("%v", err)
	case err != nil && ctx.Err() != nil:
		return err
	case err != nil:
		return &exitStatus{code: exitVerifyCannotRun, err: err}
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			return err
		}
	} else {
		printVerify(e.stdout, a.addr, r)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if r.Failed() {
		return &exitStatus{code: exitVerifyFailed}
	}
	return nil
}

// verifyWidth is the width printVerify wraps summaries and fixes to.
const verifyWidth = 100

// printVerify prints the report as text: a heading, one block per finding, and a verdict.
func printVerify(w io.Writer, addr string, r *aqs.Report) {
	server := r.Server
	if server == "" {
		server = "server unknown"
	}
	fmt.Fprintf(w, "aqs verify: %s (%s; %s), prefix %q\n\n", addr, server, r.Topology, r.Prefix)
	counts := map[aqs.Severity]int{}
	const indent = "                   " // "FAIL  " + the check's column
	for _, f := range r.Findings {
		counts[f.Severity]++
		check := f.Check
		if f.Server != "" {
			check += " " + f.Server
		}
		head := fmt.Sprintf("%-4s  %-11s  ", strings.ToUpper(f.Severity.String()), check)
		if len(head) > len(indent) {
			fmt.Fprintln(w, strings.TrimRight(head, " "))
			head = indent
		}
		writeWrapped(w, head, indent, f.Summary)
		if f.Fix != "" {
			writeWrapped(w, indent+"fix: ", indent+"     ", f.Fix)
		}
	}
	fmt.Fprintln(w)
	tally := fmt.Sprintf("%d fail, %d warn, %d pass, %d skip", counts[aqs.Fail], counts[aqs.Warn], counts[aqs.Pass], counts[aqs.Skip])
	switch r.Worst() {
	case aqs.Fail:
		fmt.Fprintf(w, "%s: a guarantee does not hold on this deployment, or the library cannot work on it (exit status 1)\n", tally)
	case aqs.Warn:
		fmt.Fprintf(w, "%s: the guarantees hold, with the limits above\n", tally)
	default:
		fmt.Fprintf(w, "%s: the deployment is as the library assumes\n", tally)
	}
}

// writeWrapped writes text after first, wrapped at verifyWidth, its next lines after rest.
func writeWrapped(w io.Writer, first, rest, text string) {
	line := first
	fresh := true
	for _, word := range strings.Fields(text) {
		if !fresh && len(line)+1+len(word) > verifyWidth {
			fmt.Fprintln(w, line)
			line, fresh = rest, true
		}
		if !fresh {
			line += " "
		}
		line += word
		fresh = false
	}
	fmt.Fprintln(w, line)
}
