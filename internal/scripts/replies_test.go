package scripts_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs/internal/scripts"
)

// Every reply shape a script writes decodes into its typed value, and anything else is an
// error rather than a guess.
func TestRepliesDecodeIntoTypedValues(t *testing.T) {
	a, err := scripts.DecodeAttempt([]any{int64(1), int64(1732000000000123)})
	require.NoError(t, err)
	assert.Equal(t, scripts.Attempt{Status: scripts.Acquired, Token: 1732000000000123}, a)
	a, err = scripts.DecodeAttempt([]any{int64(3), int64(250), "c:1", "c:2"})
	require.NoError(t, err)
	assert.Equal(t, scripts.Attempt{Status: scripts.Queued, Wait: 250 * time.Millisecond, Mine: []string{"c:1", "c:2"}}, a)
	a, err = scripts.DecodeAttempt([]any{int64(3), int64(250), int64(4)})
	require.NoError(t, err)
	assert.Equal(t, scripts.Attempt{Status: scripts.Queued, Wait: 250 * time.Millisecond, QueueLen: 4}, a)
	a, err = scripts.DecodeAttempt([]any{int64(2), int64(0)})
	require.NoError(t, err)
	assert.Equal(t, scripts.Granted, a.Status)
	for _, bad := range []any{int64(1), []any{int64(1)}, []any{int64(0), int64(0)}, []any{int64(9), int64(0)}, []any{"1", int64(0)}} {
		_, err := scripts.DecodeAttempt(bad)
		assert.Error(t, err, "%v", bad)
	}

	r, err := scripts.DecodeRelease([]any{int64(0), int64(2)})
	require.NoError(t, err)
	assert.Equal(t, scripts.Release{Kind: scripts.Counted, Left: 2}, r)
	r, err = scripts.DecodeRelease([]any{int64(2), "c:7", int64(5000)})
	require.NoError(t, err)
	assert.Equal(t, scripts.Release{Kind: scripts.HandedLocal, Hold: "c:7", Lease: 5 * time.Second}, r)
	r, err = scripts.DecodeRelease([]any{int64(1), "c:8"})
	require.NoError(t, err)
	assert.Equal(t, scripts.Release{Kind: scripts.Freed, Mine: []string{"c:8"}}, r)
	for _, bad := range []any{int64(0), []any{}, []any{int64(5)}, []any{int64(2), "c:7"}, []any{int64(0)}} {
		_, err := scripts.DecodeRelease(bad)
		assert.Error(t, err, "%v", bad)
	}

	s, err := scripts.DecodeSem([]any{int64(0), int64(3), "c:9"})
	require.NoError(t, err)
	assert.Equal(t, scripts.Sem{Status: scripts.SemOK, Value: 3, Mine: []string{"c:9"}}, s)
	s, err = scripts.DecodeSem([]any{int64(11), int64(0)})
	require.NoError(t, err)
	assert.Equal(t, scripts.SemReleasedByID, s.Status)
	assert.False(t, s.Gone(), "a permit released by id is not a lease run out")
	_, err = scripts.DecodeSem([]any{int64(12), int64(0)})
	assert.Error(t, err)

	b, err := scripts.DecodeBeat(int64(2))
	require.NoError(t, err)
	assert.Equal(t, scripts.BeatGranted, b)
	_, err = scripts.DecodeBeat(int64(3))
	assert.Error(t, err)
	g, err := scripts.DecodeGiveUp(int64(1))
	require.NoError(t, err)
	assert.Equal(t, scripts.LeftQueue, g)
}

// The inspection and condition replies decode as their scripts write them.
func TestInfoPollSignalAndNumberRepliesDecode(t *testing.T) {
	in, err := scripts.DecodeLockInfo([]any{"c:1", int64(2), "17", int64(900)})
	require.NoError(t, err)
	assert.Equal(t, scripts.LockState{Holder: "c:1", Count: 2, Token: 17, Remaining: 900 * time.Millisecond}, in)
	in, err = scripts.DecodeLockInfo([]any{nil, int64(0), nil, int64(-2)})
	require.NoError(t, err)
	assert.Equal(t, scripts.LockState{}, in)
	rw, err := scripts.DecodeRWInfo([]any{nil, int64(0), nil, int64(-2), int64(3), int64(1)})
	require.NoError(t, err)
	assert.Equal(t, scripts.RWState{Readers: 3, Waiters: 1}, rw)
	moved, _, err := scripts.DecodePoll([]any{int64(0)})
	require.NoError(t, err)
	assert.True(t, moved)
	moved, a, err := scripts.DecodePoll([]any{int64(3), int64(100)})
	require.NoError(t, err)
	assert.False(t, moved)
	assert.Equal(t, scripts.Queued, a.Status)
	sig, err := scripts.DecodeSignal([]any{int64(2), "c:9"})
	require.NoError(t, err)
	assert.Equal(t, scripts.Signal{Moved: 2, Mine: []string{"c:9"}}, sig)
	n, err := scripts.DecodeNumber([]any{int64(-1)})
	require.NoError(t, err)
	assert.EqualValues(t, -1, n)
	for _, bad := range []any{int64(1), []any{}, []any{"x", "y"}} {
		_, err := scripts.DecodeNumber(bad)
		assert.Error(t, err, "%v", bad)
		_, err = scripts.DecodeLockInfo(bad)
		assert.Error(t, err, "%v", bad)
	}
}

func TestScalarRepliesDecode(t *testing.T) {
	n, err := scripts.DecodeInt(int64(7))
	require.NoError(t, err)
	assert.EqualValues(t, 7, n)
	for _, bad := range []any{"7", []any{int64(7)}, nil} {
		_, err := scripts.DecodeInt(bad)
		assert.Error(t, err, "%v", bad)
	}
	avail, set, err := scripts.DecodeAvailable([]any{int64(3), int64(5)})
	require.NoError(t, err)
	assert.EqualValues(t, 3, avail)
	assert.True(t, set)
	_, set, err = scripts.DecodeAvailable([]any{int64(0), int64(-1)})
	require.NoError(t, err)
	assert.False(t, set, "never set")
	for _, bad := range []any{int64(1), []any{int64(1)}, []any{"x", int64(1)}} {
		_, _, err := scripts.DecodeAvailable(bad)
		assert.Error(t, err, "%v", bad)
	}
}
