package election

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Observe's receiver never receives the same Token and Value twice in a row, even when it
// fell behind and the change it missed is replaced by one that brings the value it has back.
func TestObserverNeverHandsTheReceiverTheSameLeaderTwiceInARow(t *testing.T) {
	x, y, z := Leadership{Value: "x", Token: 1}, Leadership{Value: "y", Token: 1}, Leadership{Value: "z", Token: 1}
	o := observer{out: make(chan Leadership, 1)}
	o.deliver(x, 1)
	require.Equal(t, x, <-o.out)
	o.deliver(y, 2) // the receiver does not take it...
	o.deliver(x, 3) // ...and the value comes back to the one it has
	select {
	case l := <-o.out:
		t.Fatalf("the receiver, which has %+v, received %+v", x, l)
	default:
	}
	o.deliver(z, 4)
	assert.Equal(t, z, <-o.out)

	// A receiver that took nothing yet gets the latest, whatever came before.
	p := observer{out: make(chan Leadership, 1)}
	p.deliver(x, 1)
	p.deliver(y, 2)
	p.deliver(x, 3)
	assert.Equal(t, x, <-p.out)
}
