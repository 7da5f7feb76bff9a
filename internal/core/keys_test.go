package core_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/reentrant"
)

// nameTokens are the pieces names are built from: the bytes the escaping handles, what the
// escapes look like, the separators keys are built with, and bytes that are not text.
var nameTokens = []string{
	"{", "}", "{}", "}{", "%", "%7D", "%7B", "%25", "%7d", "7D", "25", "%%",
	":", ":ch", "a", "b", " ", "\n", "\r\n", "\x00", "\xff", "\xc3", "é", "\U0001F512",
}

// tokenString draws a string of 1 to max tokens, which makes near-collisions likely: if the
// escaping were not one-to-one, two such strings would soon map to one key.
func tokenString(tokens []string, max int) *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		return strings.Join(rapid.SliceOfN(rapid.SampledFrom(tokens), 1, max).Draw(t, "tokens"), "")
	})
}

// nameGen draws any non-empty name: token soup, arbitrary bytes, or a long one.
var nameGen = rapid.OneOf(
	tokenString(nameTokens, 8),
	rapid.Map(rapid.SliceOfN(rapid.Byte(), 1, 64), func(b []byte) string { return string(b) }),
	rapid.Map(rapid.SliceOfN(rapid.SampledFrom([]byte("{}%7DB")), 1000, 4000), func(b []byte) string { return string(b) }),
)

// prefixGen draws valid key prefixes: non-empty, no brace.
var prefixGen = tokenString([]string{"aqs", "a", ":", "%", "%7B", "x:", "\x00", "\n", "é"}, 4)

// suffixGen draws what primitives append to a base key: the real suffixes, and anything else
// that starts with ":" as every suffix does, braces included.
var suffixGen = rapid.OneOf(
	rapid.SampledFrom([]string{"", ":ch", ":q", ":w", ":ch:1", ":}", ":{", ":{x}"}),
	rapid.Map(tokenString(nameTokens, 4), func(s string) string { return ":" + s }),
)

// unescape inverts the escaping of names in keys, rejecting anything the escaping cannot
// produce.
func unescape(s string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '{', '}':
			return "", false
		case '%':
			if i+3 > len(s) {
				return "", false
			}
			switch s[i+1 : i+3] {
			case "25":
				b.WriteByte('%')
			case "7B":
				b.WriteByte('{')
			case "7D":
				b.WriteByte('}')
			default:
				return "", false
			}
			i += 2
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), true
}

// decodeKey splits "<prefix>:{<escaped name>}<suffix>", or "<prefix>:{<tag>}{<escaped
// name>}<suffix>" for a name with a hash tag of its own, back into its parts. That it recovers
// every (prefix, name, suffix) is what makes keys one-to-one.
func decodeKey(key string) (prefix, name, suffix string, ok bool) {
	open := strings.IndexByte(key, '{')
	if open < 1 || key[open-1] != ':' {
		return "", "", "", false
	}
	end := strings.IndexByte(key[open+1:], '}')
	if end < 0 {
		return "", "", "", false
	}
	first, rest := key[open+1:open+1+end], key[open+2+end:]
	if strings.HasPrefix(rest, "{") {
		// The tagged form: the tag, then the whole name escaped.
		end := strings.IndexByte(rest, '}')
		if end < 0 {
			return "", "", "", false
		}
		name, ok = unescape(rest[1:end])
		tag, tagged := core.HashTag(name)
		return key[:open-1], name, rest[end+1:], ok && tagged && tag == first
	}
	name, ok = unescape(first)
	_, tagged := core.HashTag(name)
	return key[:open-1], name, rest, ok && !tagged
}

func mustBaseKey(t interface{ Fatalf(string, ...any) }, prefix, name string) string {
	key, err := core.BaseKey(prefix, name)
	if err != nil {
		t.Fatalf("BaseKey(%q, %q): %v", prefix, name, err)
	}
	return key
}

func TestKeysMapOneToOneFromPrefixNameAndSuffix(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p1, n1, s1 := prefixGen.Draw(t, "p1"), nameGen.Draw(t, "n1"), suffixGen.Draw(t, "s1")
		p2, n2, s2 := p1, nameGen.Draw(t, "n2"), suffixGen.Draw(t, "s2")
		if rapid.Bool().Draw(t, "other prefix") {
			p2 = prefixGen.Draw(t, "p2")
		}
		k1 := mustBaseKey(t, p1, n1) + s1
		k2 := mustBaseKey(t, p2, n2) + s2

		if p, n, s, ok := decodeKey(k1); !ok || p != p1 || n != n1 || s != s1 {
			t.Fatalf("key %q decodes to (%q, %q, %q, %v), want (%q, %q, %q)", k1, p, n, s, ok, p1, n1, s1)
		}
		same := p1 == p2 && n1 == n2 && s1 == s2
		if (k1 == k2) != same {
			t.Fatalf("(%q, %q, %q) -> %q and (%q, %q, %q) -> %q", p1, n1, s1, k1, p2, n2, s2, k2)
		}
		if b1, b2 := mustBaseKey(t, p1, n1), mustBaseKey(t, p1, n2); (b1 == b2) != (n1 == n2) {
			t.Fatalf("names %q and %q -> base keys %q and %q", n1, n2, b1, b2)
		}
	})
}

func TestEveryKeyAndChannelOfANameHashToOneSlot(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		prefix, name := prefixGen.Draw(t, "prefix"), nameGen.Draw(t, "name")
		base := mustBaseKey(t, prefix, name)
		slot := core.Slot(base)
		for _, suffix := range []string{"", ":ch", suffixGen.Draw(t, "suffix")} {
			if got := core.Slot(base + suffix); got != slot {
				t.Fatalf("%q is in slot %d, its base key %q in %d", base+suffix, got, base, slot)
			}
		}
		if other := mustBaseKey(t, prefixGen.Draw(t, "other prefix"), name); core.Slot(other) != slot {
			t.Fatalf("the slot depends on the prefix: %q in %d, %q in %d", base, slot, other, core.Slot(other))
		}
	})
}

func TestNamesThatShareAHashTagShareItsSlot(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tag := rapid.StringMatching(`[^}]{1,12}`).Draw(t, "tag")
		prefix := prefixGen.Draw(t, "prefix")
		for _, rest := range []string{"", ":sku-1", nameGen.Draw(t, "rest")} {
			name := nameGen.Draw(t, "before")
			if strings.IndexByte(name, '{') >= 0 {
				name = ""
			}
			name += "{" + tag + "}" + rest
			if got, want := core.Slot(mustBaseKey(t, prefix, name)+":q"), core.Slot(name); got != want {
				t.Fatalf("%q is in slot %d, its tag %q in %d", name, got, tag, want)
			}
		}
	})
}

func TestNamesOfAnyLengthAndBytesAreAccepted(t *testing.T) {
	long := strings.Repeat("}{%\x00\xff", 200_000) // 1MB
	for _, name := range []string{"\x00", "\n", "\xff\xfe", "{}", "}{", long} {
		key, err := core.BaseKey("aqs", name)
		require.NoError(t, err)
		_, got, suffix, ok := decodeKey(key + ":ch")
		require.True(t, ok)
		assert.True(t, got == name && suffix == ":ch", "round trip of a %d-byte name", len(name))
	}
}

// TestSlotAgreesWithClusterKeyslot compares Slot with the server's CLUSTER KEYSLOT on the
// hash-tag corner cases and on keys drawn at random.
func TestSlotAgreesWithClusterKeyslot(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Cluster(t).Client(t)
	serverSlot := func(key string) int {
		slot, err := rdb.ClusterKeySlot(ctx, key).Result()
		require.NoError(t, err, "CLUSTER KEYSLOT %q", key)
		return int(slot)
	}

	assert.Equal(t, 12739, core.Slot("123456789"), "the CRC16/XMODEM check value of the cluster spec")
	for _, key := range []string{
		"", "a", "123456789", "{", "}", "{}", "}{", "{}{a}", "a{}b{c}", "{a}", "x{a}y", "{{a}}",
		"{a}}", "a{b", "a}b{c}", "{a}{b}", "\x00", "\xff\xfe{\x00}", strings.Repeat("{x", 5000),
		"aqs:{a%7Db}", "aqs:{a%7Db}:ch", "aqs:{%7B%7D}", "aqs:{%25}",
	} {
		assert.Equal(t, serverSlot(key), core.Slot(key), "slot of %q", key)
	}

	anyKey := rapid.OneOf(
		tokenString(append([]string{"{", "}", "x", "aqs:"}, nameTokens...), 12),
		rapid.Map(rapid.SliceOf(rapid.Byte()), func(b []byte) string { return string(b) }),
		rapid.Custom(func(t *rapid.T) string {
			return mustBaseKey(t, prefixGen.Draw(t, "prefix"), nameGen.Draw(t, "name")) + suffixGen.Draw(t, "suffix")
		}),
	)
	rapid.Check(t, func(rt *rapid.T) {
		key := anyKey.Draw(rt, "key")
		slot, err := rdb.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			rt.Fatalf("CLUSTER KEYSLOT %q: %v", key, err)
		}
		if got := core.Slot(key); got != int(slot) {
			rt.Fatalf("Slot(%q) = %d, server says %d", key, got, slot)
		}
	})
}

func TestEmptyNameIsAnInvalidArgument(t *testing.T) {
	_, err := core.BaseKey("aqs", "")
	require.ErrorIs(t, err, core.ErrInvalidArgument)
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument)

	c := newClient(t, redistest.Single(t).Client(t))
	l, err := reentrant.New(c, "")
	assert.Nil(t, l)
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument)
}

func TestPrefixWithABraceIsRejected(t *testing.T) {
	for _, prefix := range []string{"", "{", "}", "a{b", "a}b", "{x}", "x:{"} {
		assert.ErrorIs(t, core.ValidPrefix(prefix), core.ErrInvalidArgument, "prefix %q", prefix)
	}
	for _, prefix := range []string{"aqs", "a:b", "%7B", "%", "x:", "\x00"} {
		assert.NoError(t, core.ValidPrefix(prefix), "prefix %q", prefix)
	}

	ctx := context.Background()
	rdb := redistest.Single(t).Client(t)
	_, err := aqs.New(ctx, rdb, aqs.WithKeyPrefix("a{b"))
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument, "WithKeyPrefix")
	cfg := core.DefaultConfig()
	cfg.Prefix = "x}"
	rt, err := core.NewRuntime(ctx, rdb, cfg)
	assert.Nil(t, rt)
	assert.ErrorIs(t, err, core.ErrInvalidArgument, "NewRuntime")
}

// TestLocksNamedWithBracesAreIndependentOnACluster holds locks whose names differ only in
// braces and escapes, each by its own owner, all at once: no lock touches another's key, and
// each key lives in the slot of its own (escaped) name, or of the name's hash tag when it has
// one, with its channel.
func TestLocksNamedWithBracesAreIndependentOnACluster(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Cluster(t).Client(t)
	prefix := redistest.Name(t)
	c := newClient(t, rdb, aqs.WithKeyPrefix(prefix))
	serverSlot := func(key string) int64 {
		slot, err := rdb.ClusterKeySlot(ctx, key).Result()
		require.NoError(t, err)
		return slot
	}

	escaped := []struct{ name, esc string }{
		{"a}b", "a%7Db"}, {"{x}", "%7Bx%7D"}, {"a", "a"}, {"a}", "a%7D"}, {"{", "%7B"},
		{"}", "%7D"}, {"{}", "%7B%7D"}, {"}{", "%7D%7B"}, {"%7D", "%257D"}, {"%", "%25"},
		{"a{b}c", "a%7Bb%7Dc"}, {"x\n\x00\xff", "x\n\x00\xff"},
	}
	locks := make([]*reentrant.Lock, len(escaped))
	helds := make([]context.Context, len(escaped))
	for i, e := range escaped {
		l, err := reentrant.New(c, e.name)
		require.NoError(t, err)
		locks[i] = l
		want, slot := prefix+":{"+e.esc+"}", serverSlot(e.esc)
		if tag, ok := core.HashTag(e.name); ok {
			// A name with a hash tag of its own lives in the slot of that tag, as Redis
			// would place a key of that name.
			want, slot = prefix+":{"+tag+"}{"+e.esc+"}", serverSlot(e.name)
		}
		require.Equal(t, want, l.Key(), "key of %q", e.name)
		assert.Equal(t, slot, serverSlot(l.Key()), "%q is in the slot of its name", l.Key())
		assert.Equal(t, slot, serverSlot(l.Key()+":ch"), "the channel of %q is in its slot", e.name)
		assert.Equal(t, int(slot), core.Slot(l.Key()))

		held, ok, err := l.TryLock(ctx) // context.Background: a new owner each time
		require.NoError(t, err)
		require.True(t, ok, "%q is free although other brace names are held", e.name)
		helds[i] = held
	}

	owners := map[string]bool{}
	for i, l := range locks {
		info, err := l.Info(ctx)
		require.NoError(t, err)
		assert.True(t, info.Locked, l.Name())
		assert.Equal(t, 1, info.HoldCount, "%q was taken once", l.Name())
		owners[info.Holder] = true
		n, err := rdb.Exists(ctx, l.Key()).Result()
		require.NoError(t, err)
		assert.Equal(t, int64(1), n, "%q exists", l.Key())
		_, ok, err := l.TryLock(ctx)
		require.NoError(t, err)
		assert.False(t, ok, "%q is really held", l.Name())
		assert.NoError(t, helds[i].Err())
	}
	assert.Len(t, owners, len(locks), "one owner per lock")

	for i, l := range locks {
		require.NoError(t, l.Unlock(helds[i]), l.Name())
		locked, err := l.IsLocked(ctx)
		require.NoError(t, err)
		assert.False(t, locked, "%q is free after its Unlock", l.Name())
		for j := i + 1; j < len(locks); j++ {
			locked, err := locks[j].IsLocked(ctx)
			require.NoError(t, err)
			assert.True(t, locked, "unlocking %q left %q held", l.Name(), locks[j].Name())
		}
	}
}

// newClient returns an aqs Client on rdb, closed at the end of the test.
var newClient = redistest.NewClient

func TestNewRejectsBadOptions(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Single(t).Client(t)
	for name, opt := range map[string]aqs.Option{
		"nil option":        nil,
		"empty prefix":      aqs.WithKeyPrefix(""),
		"zero watchdog":     aqs.WithWatchdogTimeout(0),
		"negative watchdog": aqs.WithWatchdogTimeout(-time.Second),
		"1ns watchdog":      aqs.WithWatchdogTimeout(time.Nanosecond),
	} {
		c, err := aqs.New(ctx, rdb, opt)
		if err == nil {
			_ = c.Close()
		}
		assert.ErrorIs(t, err, aqs.ErrInvalidArgument, name)
	}
}
