// Package benchutil holds what the benchmarks of every primitive share: the floor (the
// minimal correct lock every lock is measured against) and a command counter.
package benchutil

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Counter is a go-redis hook that counts the commands a client sends, SUBSCRIBEs apart.
type Counter struct {
	Cmds, Subscribes atomic.Int64
}

// DialHook passes dials through.
func (c *Counter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return next(ctx, network, addr)
	}
}

// ProcessHook counts one command.
func (c *Counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.Cmds.Add(1)
		if strings.HasSuffix(strings.ToLower(cmd.Name()), "subscribe") {
			c.Subscribes.Add(1)
		}
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook counts a pipeline's commands.
func (c *Counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.Cmds.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// floorDel is the floor's release: delete the key only if it still holds our token.
var floorDel = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)

// LoadFloor loads the floor's script, so that its first cycle is already an EVALSHA.
func LoadFloor(ctx context.Context, rdb redis.Scripter) error { return floorDel.Load(ctx, rdb).Err() }

// FloorCycle is one cycle of the minimal correct lock: SET NX PX, then a Lua compare-and-delete.
// Two round trips: the baseline every lock is measured against.
func FloorCycle(ctx context.Context, b testing.TB, rdb redis.Cmdable, key, token string) {
	ok, err := rdb.SetNX(ctx, key, token, 30*time.Second).Result()
	if err != nil || !ok {
		b.Fatalf("floor: SET NX: %v %v", ok, err)
	}
	if err := floorDel.Run(ctx, rdb, []string{key}, token).Err(); err != nil {
		b.Fatal(err)
	}
}
