package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs/internal/core"
)

// What inspect, unlock and run share: they use a Redis that other processes share, so
// unlike demo they never start a throwaway server, and they take the address of a Redis
// Cluster or of Sentinel as well as a single server's.

// adminFlags are the flags of inspect, unlock and run.
type adminFlags struct {
	redis  string
	prefix string
}

// addAdminFlags registers --redis and --prefix.
func addAdminFlags(fs *flag.FlagSet) *adminFlags {
	a := &adminFlags{}
	fs.StringVar(&a.redis, "redis", "", "Redis `address`: host:port, or a redis://, rediss:// or unix:// URL (default $"+redisURLEnv+").\n"+
		"A Redis Cluster: any node's address, or host:port,host:port,...\n"+
		"Sentinel: redis://sentinel:26379?master_name=NAME[&addr=sentinel2:26379...]")
	fs.StringVar(&a.prefix, "prefix", "aqs", "key `prefix` the primitives were created with (aqs.WithKeyPrefix)")
	return a
}

// parseWithName parses args into fs, flags and the one NAME in any order ("--" ends the
// flags, for a name that starts with "-"). It returns flag.ErrHelp for -h and a *usageError
// for anything else wrong.
func parseWithName(fs *flag.FlagSet, args []string) (string, error) {
	var names []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return "", err
			}
			return "", &usageError{err: err, reported: true}
		}
		if fs.NArg() == 0 {
			break
		}
		// fs.Parse stops at the first non-flag, and after "--": a name, then maybe more flags.
		dashes := len(args) > len(fs.Args()) && args[len(args)-len(fs.Args())-1] == "--"
		names = append(names, fs.Arg(0))
		args = fs.Args()[1:]
		if dashes {
			names = append(names, args...)
			break
		}
	}
	switch len(names) {
	case 0:
		return "", usagef("missing NAME")
	case 1:
		if names[0] == "" {
			return "", usagef("empty NAME")
		}
		return names[0], nil
	}
	return "", usagef("unexpected argument %q: one NAME only", names[1])
}

// admin is an open connection to the Redis that holds the primitives.
type admin struct {
	rdb    redis.UniversalClient
	addr   string // as given, its password redacted: for messages
	prefix string
}

// openAdmin resolves the address (the flag, else $REDIS_URL; neither is a usage error),
// connects and checks that the server answers. For a single-server address it asks the
// server whether it is a Redis Cluster node, and if so talks to the cluster. The caller must
// Close the result.
func openAdmin(ctx context.Context, e *env, f *adminFlags) (*admin, error) {
	if err := core.ValidPrefix(f.prefix); err != nil {
		return nil, usagef("--prefix: %v", err)
	}
	addr := f.redis
	if addr == "" {
		addr = e.getenv(redisURLEnv)
	}
	if addr == "" {
		return nil, usagef("no Redis address: give --redis host:port or set %s "+
			"(inspect, top, unlock, run and verify use an existing Redis; they start none)", redisURLEnv)
	}
	rdb, single, err := newUniversalClient(addr)
	if err != nil {
		return nil, usagef("%v", err)
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		rdb.Close()
		return nil, unreachable(redactAddr(addr), err)
	}
	if single {
		// A node of a Redis Cluster serves only its own slots: talk to the whole cluster. A
		// server that does not answer INFO (renamed by its configuration) is taken as it is.
		c := rdb.(*redis.Client)
		if info, err := c.Info(ctx, "cluster").Result(); err == nil && strings.Contains(info, "cluster_enabled:1") {
			cc := redis.NewClusterClient(clusterOptions(c.Options()))
			c.Close()
			if err := cc.Ping(ctx).Err(); err != nil {
				cc.Close()
				return nil, unreachable(redactAddr(addr), err)
			}
			rdb = cc
		}
	}
	return &admin{rdb: rdb, addr: redactAddr(addr), prefix: f.prefix}, nil
}

// Close closes the connection.
func (a *admin) Close() { a.rdb.Close() }

// unreachable explains a failure to talk to the server at addr.
func unreachable(addr string, err error) error {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("cannot reach Redis at %s: connection refused (is redis-server running there?)", addr)
	case errors.Is(err, context.Canceled):
		return err
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return fmt.Errorf("cannot reach Redis at %s: unknown host %q", addr, dns.Name)
	}
	return fmt.Errorf("cannot reach Redis at %s: %w", addr, err)
}

// newUniversalClient returns a client for addr without contacting it, and whether addr names
// one server:
//   - "host:port,host:port,..." is a Redis Cluster;
//   - a redis:// or rediss:// URL with master_name is Sentinel (its addresses are the
//     sentinels'), one with addr= parameters and no master_name a Redis Cluster;
//   - anything else is one server, as for demo (parseRedisAddr).
func newUniversalClient(addr string) (rdb redis.UniversalClient, single bool, err error) {
	if strings.Contains(addr, "://") {
		u, err := url.Parse(addr)
		if err != nil {
			return nil, false, fmt.Errorf("bad Redis URL %q: %w", addr, err)
		}
		q := u.Query()
		switch {
		case (u.Scheme == "redis" || u.Scheme == "rediss") && q.Has("master_name"):
			opts, err := redis.ParseFailoverURL(addr)
			if err != nil {
				return nil, false, fmt.Errorf("bad Sentinel URL %q: %w", addr, err)
			}
			return redis.NewFailoverClient(opts), false, nil
		case (u.Scheme == "redis" || u.Scheme == "rediss") && q.Has("addr"):
			opts, err := redis.ParseClusterURL(addr)
			if err != nil {
				return nil, false, fmt.Errorf("bad Redis Cluster URL %q: %w", addr, err)
			}
			return redis.NewClusterClient(opts), false, nil
		}
	} else if strings.Contains(addr, ",") {
		addrs := strings.Split(addr, ",")
		for _, a := range addrs {
			if _, _, err := net.SplitHostPort(a); err != nil {
				return nil, false, fmt.Errorf("bad Redis Cluster address %q in %q: want host:port addresses separated by commas", a, addr)
			}
		}
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs}), false, nil
	}
	opts, err := parseRedisAddr(addr)
	if err != nil {
		return nil, false, err
	}
	return redis.NewClient(opts), true, nil
}

// clusterOptions turns a single node's options into a cluster client's seeded with it.
func clusterOptions(o *redis.Options) *redis.ClusterOptions {
	return &redis.ClusterOptions{
		Addrs:        []string{o.Addr},
		Username:     o.Username,
		Password:     o.Password,
		TLSConfig:    o.TLSConfig,
		DialTimeout:  o.DialTimeout,
		ReadTimeout:  o.ReadTimeout,
		WriteTimeout: o.WriteTimeout,
	}
}
