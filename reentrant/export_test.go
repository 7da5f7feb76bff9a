package reentrant

// Boarded returns how many waiters wait for a release of this Lock's hold without an attempt
// of their own (see boarding).
func (l *Lock) Boarded() int {
	l.bd.mu.Lock()
	defer l.bd.mu.Unlock()
	return len(l.bd.boarded)
}
