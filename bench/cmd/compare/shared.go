package main

import (
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The witness every critical section reports to.
//
// Each holder marks itself inside, notes whether it was also the previous holder, and leaves.
// A second holder that finds the mark set is an overlap: the lock let two in at once. The
// previous-holder note gives the releaser re-acquire share. Within one process these are
// plain atomics; across processes they live in a small file that every process maps, so the
// same compare-and-swap sees holders of all processes (x86 and arm64 atomics work on shared
// memory as on private memory). A holder of a cart (carts.go) marks each of its names
// instead, in a mark per name of the pool.

// witness is the state the critical section checks and updates.
type witness struct {
	inside   *atomic.Int32
	overlaps *atomic.Int64
	last     *atomic.Int64 // id of the goroutine that last acquired, -1 at a slice's start
	// names has a mark per name of a cart scenario's pool (carts.go): 1 while a holder of the
	// name is inside.
	names []atomic.Int32
	mem   []byte // the mapping, if shared across processes
}

// The mapped file: a page of the three words, then the names' marks.
const (
	witnessNames = 1024
	namesOffset  = 4096
	witnessSize  = namesOffset + 4*witnessNames
)

// newLocalWitness returns a witness for the goroutines of this process only.
func newLocalWitness() *witness {
	w := &witness{inside: new(atomic.Int32), overlaps: new(atomic.Int64), last: new(atomic.Int64),
		names: make([]atomic.Int32, witnessNames)}
	w.last.Store(-1)
	return w
}

// createSharedWitness creates the file that processes map to share a witness, and maps it.
func createSharedWitness() (*witness, string, error) {
	f, err := os.CreateTemp("", "aqs-bench-witness-")
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	if err := f.Truncate(witnessSize); err != nil {
		os.Remove(f.Name())
		return nil, "", err
	}
	w, err := mapWitness(f.Name())
	if err != nil {
		os.Remove(f.Name())
		return nil, "", err
	}
	w.last.Store(-1)
	return w, f.Name(), nil
}

// mapWitness maps the witness file at path.
func mapWitness(path string) (*witness, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close() // the mapping outlives the descriptor
	mem, err := unix.Mmap(int(f.Fd()), 0, witnessSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mapping %s: %w", path, err)
	}
	// The mapping is page aligned, so every word below is aligned for 64-bit atomics.
	return &witness{
		inside:   (*atomic.Int32)(unsafe.Pointer(&mem[0])),
		overlaps: (*atomic.Int64)(unsafe.Pointer(&mem[8])),
		last:     (*atomic.Int64)(unsafe.Pointer(&mem[16])),
		names:    unsafe.Slice((*atomic.Int32)(unsafe.Pointer(&mem[namesOffset])), witnessNames),
		mem:      mem,
	}, nil
}

// enterNames marks the names of a cart (indexes into names) held, counting an overlap for
// each that another holder has marked already, and returns the function that clears the
// marks it set, for the holder to call as it leaves.
func (w *witness) enterNames(cart []int) (leave func()) {
	var mine []int
	for _, j := range cart {
		if w.names[j].CompareAndSwap(0, 1) {
			mine = append(mine, j)
		} else {
			w.overlaps.Add(1)
		}
	}
	return func() {
		for _, j := range mine {
			w.names[j].Store(0)
		}
	}
}

// unmap releases a shared witness's mapping; it does nothing for a local one.
func (w *witness) unmap() {
	if w.mem != nil {
		_ = unix.Munmap(w.mem)
	}
}
