package core

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Eviction.
//
// A server with maxmemory set and any policy but noeviction deletes keys under memory
// pressure: a lock's key evicted is a lock released behind its holder's back, and the next
// caller gets it while the holder still works. Every aqs key is exposed: the volatile-*
// policies evict keys that have an expiry, which every lease has. New warns about it (below)
// and aqs.Verify reports it as a broken guarantee.

// EvictionFacts is what a server says about eviction.
type EvictionFacts struct {
	Policy    string // maxmemory-policy
	MaxMemory int64  // maxmemory in bytes; 0: no limit
}

// Evicts reports whether the server may evict keys now: a limit and a policy other than
// noeviction.
func (f EvictionFacts) Evicts() bool { return f.MaxMemory > 0 && EvictingPolicy(f.Policy) }

// EvictingPolicy reports whether policy evicts keys once maxmemory is reached: every policy
// but noeviction.
func EvictingPolicy(policy string) bool { return policy != "noeviction" }

// ReadEviction reads node's maxmemory and policy from INFO memory, which managed services
// that refuse CONFIG usually answer, else from CONFIG GET.
func ReadEviction(ctx context.Context, node redis.Cmdable) (EvictionFacts, error) {
	info, err := node.Info(ctx, "memory").Result()
	if err == nil {
		f := ParseInfo(info)
		policy, ok1 := f["maxmemory_policy"]
		max, err1 := strconv.ParseInt(f["maxmemory"], 10, 64)
		if ok1 && err1 == nil {
			return EvictionFacts{Policy: policy, MaxMemory: max}, nil
		}
	}
	cfg, cerr := node.ConfigGet(ctx, "maxmemory*").Result()
	if cerr != nil {
		if err == nil {
			err = cerr
		}
		return EvictionFacts{}, fmt.Errorf("read the eviction policy: %w", err)
	}
	max, perr := strconv.ParseInt(cfg["maxmemory"], 10, 64)
	if cfg["maxmemory-policy"] == "" || perr != nil {
		return EvictionFacts{}, fmt.Errorf("read the eviction policy: CONFIG GET maxmemory* answered %v", cfg)
	}
	return EvictionFacts{Policy: cfg["maxmemory-policy"], MaxMemory: max}, nil
}

// ParseInfo parses an INFO reply into its fields; section headers and blank lines are
// skipped.
func ParseInfo(info string) map[string]string {
	f := make(map[string]string)
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimRight(line, "\r")
		if line == "" || line[0] == '#' {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			f[k] = v
		}
	}
	return f
}

// warnEviction logs a warning for every master of rdb that may evict keys. A server that
// answers neither INFO memory nor CONFIG GET is passed over in silence: aqs.Verify says what
// it could not check.
func warnEviction(ctx context.Context, rdb redis.UniversalClient, log *slog.Logger) {
	var mu sync.Mutex
	check := func(ctx context.Context, node redis.Cmdable, addr string) {
		f, err := ReadEviction(ctx, node)
		if err != nil || !f.Evicts() {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		log.WarnContext(ctx, "aqs: the server may evict lock keys under memory pressure, and a second holder then gets in; set maxmemory-policy noeviction (aqs verify explains)",
			"server", addr, "maxmemory-policy", f.Policy, "maxmemory", f.MaxMemory)
	}
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		_ = cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			check(ctx, node, node.Options().Addr)
			return nil
		})
		return
	}
	addr := ""
	if c, ok := rdb.(*redis.Client); ok {
		addr = c.Options().Addr
	}
	check(ctx, rdb, addr)
}
