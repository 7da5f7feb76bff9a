package aqs

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/redaqs/aqs/internal/core"
)

// The events the internal packages report keep their kind: the two sets of constants agree.
func TestEventKindsAreTheInternalOnes(t *testing.T) {
	for k, want := range map[core.EventKind]EventKind{
		core.EventAcquired: EventAcquired, core.EventQueued: EventQueued, core.EventGaveUp: EventGaveUp,
		core.EventFailed: EventFailed, core.EventReleased: EventReleased, core.EventLeaseLost: EventLeaseLost,
	} {
		assert.Equal(t, want, EventKind(k), "core's %d", k)
	}
}
