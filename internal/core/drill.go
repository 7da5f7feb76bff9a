package core

import (
	"context"
	"sort"
	"sync"
)

// Drill is a short live exercise of one primitive, which aqs.Verify runs on a scratch name
// with two Clients of its own. Each primitive's package registers its drills at init, so Verify
// drills the primitives the program links.
type Drill struct {
	// Primitive names what is drilled, e.g. "fair lock"; drills run in its order.
	Primitive string
	// Run exercises the primitive at name through a and b (two *aqs.Client) and returns what it
	// saw, or an error that says which promise failed. It releases everything it took; what it
	// leaves under name (a semaphore's permits) Verify deletes.
	Run func(ctx context.Context, a, b any, name string) (string, error)
}

var (
	drillsMu sync.Mutex
	drills   []Drill
)

// RegisterDrill adds d to the drills Verify runs.
func RegisterDrill(d Drill) {
	drillsMu.Lock()
	defer drillsMu.Unlock()
	drills = append(drills, d)
	sort.SliceStable(drills, func(i, j int) bool { return drills[i].Primitive < drills[j].Primitive })
}

// Drills returns the registered drills in the order of their primitives' names.
func Drills() []Drill {
	drillsMu.Lock()
	defer drillsMu.Unlock()
	return append([]Drill(nil), drills...)
}
