package aqs

import (
	"testing"

	"github.com/redaqs/aqs/internal/scripts"
)

// The ACL check runs every command the scripts call: a script that starts calling a new
// command needs a probe here.
func TestEveryCommandOfTheScriptsHasAnACLProbe(t *testing.T) {
	cmds := scripts.Commands()
	if len(cmds) < 10 {
		t.Fatalf("scripts.Commands found only %v", cmds)
	}
	for _, c := range cmds {
		if aclProbes[c] == "" {
			t.Errorf("no ACL probe for %s, which a script calls", c)
		}
	}
	for c := range aclProbes {
		found := false
		for _, s := range cmds {
			found = found || s == c
		}
		if !found {
			t.Errorf("ACL probe for %s, which no script calls", c)
		}
	}
}
