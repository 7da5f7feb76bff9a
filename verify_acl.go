package aqs

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/scripts"
)

// The ACL check.
//
// Redis checks a script's commands against the user's ACL as they run, keys and channels
// included: a user allowed EVALSHA may still be refused ZADD on the prefix's keys, or PUBLISH
// on its channels, and then every call fails midway through. So the check runs, in one EVAL
// on scratch keys of the prefix, every command the library's scripts call (aclProbes: one
// probe per command of scripts.Commands, which a test holds complete), and the publish
// command; then it subscribes to a scratch channel of the prefix, as waiters do, and asks
// PUBSUB NUMSUB, as the election's Observe does. Each command runs under redis.pcall, so one
// refusal does not hide the others. The scratch keys expire within a minute, should the final
// DEL itself be refused.

// aclProbes gives, for each command the scripts call, a Lua line that runs it on the scratch
// key of the right type: s (a string), z (a sorted set), h (a hash), l (a list).
var aclProbes = map[string]string{
	"SET":              `try('SET', s, '1', 'PX', 60000)`,
	"GET":              `try('GET', s)`,
	"EXISTS":           `try('EXISTS', s)`,
	"PTTL":             `try('PTTL', s)`,
	"PEXPIRE":          `try('PEXPIRE', s, 60000)`,
	"TIME":             `try('TIME')`,
	"ZADD":             `try('ZADD', z, 1, 'm') redis.pcall('PEXPIRE', z, 60000)`,
	"ZSCORE":           `try('ZSCORE', z, 'm')`,
	"ZRANGE":           `try('ZRANGE', z, 0, -1)`,
	"ZRANGEBYSCORE":    `try('ZRANGEBYSCORE', z, '-inf', '+inf')`,
	"ZCOUNT":           `try('ZCOUNT', z, '-inf', '+inf')`,
	"ZREMRANGEBYSCORE": `try('ZREMRANGEBYSCORE', z, 5, 6)`,
	"ZREM":             `try('ZREM', z, 'm')`,
	"HSET":             `try('HSET', h, 'f', 1) redis.pcall('PEXPIRE', h, 60000)`,
	"HGET":             `try('HGET', h, 'f')`,
	"HMGET":            `try('HMGET', h, 'f', 'g')`,
	"HINCRBY":          `try('HINCRBY', h, 'f', 1)`,
	"HLEN":             `try('HLEN', h)`,
	"HDEL":             `try('HDEL', h, 'f')`,
	"RPUSH":            `try('RPUSH', l, 'a', 'b', 'c') redis.pcall('PEXPIRE', l, 60000)`,
	"LINDEX":           `try('LINDEX', l, 0)`,
	"LLEN":             `try('LLEN', l)`,
	"LPOP":             `try('LPOP', l)`,
	"RPOP":             `try('RPOP', l)`,
	"DEL":              `try('DEL', s, z, h, l)`,
}

// aclScript builds the probe: KEYS s z h l; ARGV the publish command and the channel. It
// replies with the refusals, "COMMAND: error" each.
func aclScript() string {
	var b strings.Builder
	b.WriteString(`local refused = {}
local function try(cmd, ...)
  local r = redis.pcall(cmd, ...)
  if type(r) == 'table' and r.err then
    table.insert(refused, cmd .. ': ' .. r.err)
  end
end
local s, z, h, l = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
`)
	cmds := make([]string, 0, len(aclProbes))
	for c := range aclProbes {
		cmds = append(cmds, c)
	}
	// DEL last: it clears what the others wrote.
	sort.Slice(cmds, func(i, j int) bool { return cmds[i] != "DEL" && (cmds[j] == "DEL" || cmds[i] < cmds[j]) })
	// The writes first, so that the reads find keys of their type.
	for _, c := range []string{"SET", "ZADD", "HSET", "RPUSH"} {
		b.WriteString(aclProbes[c] + "\n")
	}
	for _, c := range cmds {
		switch c {
		case "SET", "ZADD", "HSET", "RPUSH":
			continue
		}
		b.WriteString(aclProbes[c] + "\n")
	}
	b.WriteString("try(ARGV[1], ARGV[2], 'aqs verify')\nreturn refused\n")
	return b.String()
}

func (v *verifier) aclFinding(ctx context.Context) Finding {
	ctx, cancel := context.WithTimeout(ctx, verifyStepTimeout)
	defer cancel()
	base, err := core.BaseKey(v.cfg.Prefix, v.scratch+"-acl")
	if err != nil {
		return Finding{Check: CheckACL, Severity: Skip, Summary: err.Error()}
	}
	user := v.user
	if user == "" {
		user = "<user>"
	}
	channel := base + ":c"
	pub := "PUBLISH"
	if v.cluster {
		pub = "SPUBLISH"
	}
	var refused []string
	reply, err := v.rdb.Eval(ctx, aclScript(), []string{base, base + ":z", base + ":h", base + ":l"}, pub, channel).StringSlice()
	if err != nil {
		refused = append(refused, "EVAL: "+err.Error())
	}
	refused = append(refused, reply...)

	// Subscribe as the waiters do, and count subscribers as Observe does.
	if v.cluster {
		sub := v.rdb.SSubscribe(ctx, channel)
		if _, err := sub.Receive(ctx); err != nil {
			refused = append(refused, "SSUBSCRIBE: "+err.Error())
		}
		sub.Close()
		if err := v.rdb.PubSubShardNumSub(ctx, channel).Err(); err != nil {
			refused = append(refused, "PUBSUB SHARDNUMSUB: "+err.Error())
		}
	} else {
		sub := v.rdb.Subscribe(ctx, channel)
		if _, err := sub.Receive(ctx); err != nil {
			refused = append(refused, "SUBSCRIBE: "+err.Error())
		}
		sub.Close()
		if err := v.rdb.PubSubNumSub(ctx, channel).Err(); err != nil {
			refused = append(refused, "PUBSUB NUMSUB: "+err.Error())
		}
	}
	if len(refused) == 0 {
		return Finding{Check: CheckACL, Severity: Pass,
			Summary: fmt.Sprintf("the user may run the scripts' %d commands on %s:* keys, %s and subscribe on its channels",
				len(scripts.Commands()), v.cfg.Prefix, strings.ToLower(pub))}
	}
	var cmds []string
	for _, r := range refused {
		c, _, _ := strings.Cut(r, ":")
		cmds = append(cmds, "+"+strings.ToLower(strings.ReplaceAll(c, " ", "|")))
	}
	return Finding{Check: CheckACL, Severity: Fail,
		Summary: "the ACL refuses what the library runs on the prefix: " + strings.Join(refused, "; "),
		Fix:     fmt.Sprintf("ACL SETUSER %s ~%s:* &%s:* %s", user, v.cfg.Prefix, v.cfg.Prefix, strings.Join(cmds, " "))}
}
