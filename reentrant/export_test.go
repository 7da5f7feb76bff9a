package reentrant

// Boarded returns how many waiters wait for a release of this Lock's hold without an attempt
// of their own.
func (l *Lock) Boarded() int { return l.x.Boarded() }
