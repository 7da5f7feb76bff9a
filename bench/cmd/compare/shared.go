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
// memory as on private memory).

// witness is the state the critical section checks and updates.
type witness struct {
	inside   *atomic.Int32
	overlaps *atomic.Int64
	last     *atomic.Int64 // id of the goroutine that last acquired, -1 at a slice's start
	mem      []byte        // the mapping, if shared across processes
}

// witnessSize is the mapped file's length: one page holds the three words.
const witnessSize = 4096

// newLocalWitness returns a witness for the goroutines of this process only.
func newLocalWitness() *witness {
	w := &witness{inside: new(atomic.Int32), overlaps: new(atomic.Int64), last: new(atomic.Int64)}
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
		mem:      mem,
	}, nil
}

// unmap releases a shared witness's mapping; it does nothing for a local one.
func (w *witness) unmap() {
	if w.mem != nil {
		_ = unix.Munmap(w.mem)
	}
}
