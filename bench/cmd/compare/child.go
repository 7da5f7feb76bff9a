package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"
)

// The processes scenario: the program runs copies of itself as contenders.
//
// The parent starts each child with the environment below; the child connects every
// implementation, as a separate application would (its own pools, its own aqs.Client), maps
// the shared witness, says "ready", then runs one slice per line of JSON sliceSpec on its
// stdin and answers each with one line of JSON sliceResult. It exits when stdin closes. All
// children get the same start and stop times, in Unix nanoseconds of the one machine's clock.

const (
	childEnv        = "AQS_BENCH_CHILD"   // set to "1" in a child
	childAddrEnv    = "AQS_BENCH_ADDR"    // the server's address, or the cluster's nodes', comma-separated
	childWitnessEnv = "AQS_BENCH_WITNESS" // the shared witness file
	childWorkEnv    = "AQS_BENCH_WORK"    // the critical section's length, a Go duration
	childReady      = "ready"             // the child's first line
	childSetup      = 15 * time.Second    // how long a child may take to be ready
	childSliceSlack = 30 * time.Second    // how long after stop a slice's answer may take
)

// childMain is main in a child process.
func childMain() error {
	work, err := time.ParseDuration(os.Getenv(childWorkEnv))
	if err != nil {
		return fmt.Errorf("%s: %w", childWorkEnv, err)
	}
	wit, err := mapWitness(os.Getenv(childWitnessEnv))
	if err != nil {
		return err
	}
	defer wit.unmap()
	p, err := implsFor(context.Background(), os.Getenv(childAddrEnv))
	if err != nil {
		return err
	}
	defer p.close()
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintln(out, childReady)
	out.Flush()
	in := bufio.NewScanner(os.Stdin)
	enc := json.NewEncoder(out)
	for in.Scan() {
		var sp sliceSpec
		if err := json.Unmarshal(in.Bytes(), &sp); err != nil {
			return fmt.Errorf("bad slice %q: %w", in.Text(), err)
		}
		if sp.Impl < 0 || sp.Impl >= len(p.impls) {
			return fmt.Errorf("no implementation %d", sp.Impl)
		}
		if err := enc.Encode(runSlice(p, p.impls[sp.Impl], sp, wit, work)); err != nil {
			return err
		}
		if err := out.Flush(); err != nil {
			return err
		}
	}
	return in.Err()
}

// child is the parent's handle on one contender process.
type child struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string // the child's stdout, line by line; closed when it ends
}

// startChild starts a contender and waits until it is ready.
func startChild(addr, witnessPath string, work time.Duration) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), childEnv+"=1", childAddrEnv+"="+addr,
		childWitnessEnv+"="+witnessPath, childWorkEnv+"="+work.String())
	cmd.Stderr = os.Stderr
	dieWithParent(cmd)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, in: in, lines: make(chan string, 1)}
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 256<<20) // a slice's waits can make a long line
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	line, err := c.next(childSetup)
	if err == nil && line != childReady {
		err = fmt.Errorf("said %q instead of %q", line, childReady)
	}
	if err != nil {
		c.stop()
		return nil, fmt.Errorf("contender process: %w", err)
	}
	return c, nil
}

// next returns the child's next line, waiting at most within.
func (c *child) next(within time.Duration) (string, error) {
	select {
	case line, ok := <-c.lines:
		if !ok {
			return "", errors.New("the process ended")
		}
		return line, nil
	case <-time.After(within):
		return "", fmt.Errorf("no answer within %v", within)
	}
}

// send asks the child to run a slice.
func (c *child) send(sp sliceSpec) error {
	b, err := json.Marshal(sp)
	if err != nil {
		return err
	}
	_, err = c.in.Write(append(b, '\n'))
	return err
}

// result waits for the answer to the slice sent last.
func (c *child) result(sp sliceSpec) (sliceResult, error) {
	line, err := c.next(time.Until(time.Unix(0, sp.Stop)) + childSliceSlack)
	if err != nil {
		return sliceResult{}, err
	}
	var r sliceResult
	err = json.Unmarshal([]byte(line), &r)
	return r, err
}

// stop closes the child's stdin, which ends it, and waits; a child that does not end in a
// few seconds is killed.
func (c *child) stop() {
	c.in.Close()
	done := make(chan struct{})
	go func() {
		for range c.lines {
		}
		_ = c.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
}
