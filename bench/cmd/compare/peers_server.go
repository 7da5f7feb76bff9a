package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redaqs/aqs/internal/redisproc"
)

// The fair peers' servers.
//
// Like redis-server, every peer's server is started by the parent process on free loopback
// ports, with its data in a temporary directory, and killed at the end: two etcd servers (one
// that syncs its write-ahead log to disk as shipped, one started with --unsafe-no-fsync) and
// one standalone ZooKeeper server (which syncs, as shipped). The contender processes reach
// them through the environment variables below, which the parent sets and its children
// inherit (startChild passes os.Environ()).
//
// A peer whose server is not installed is left out with a line in the report saying why, and
// the Redis rows still run; a peer whose rows -impls asked for by name fails the run instead.
// make bench-compare installs both (scripts/deps --bench).

const (
	etcdFsyncEnv   = "AQS_BENCH_ETCD"         // client URL of the etcd that syncs
	etcdNoFsyncEnv = "AQS_BENCH_ETCD_NOFSYNC" // client URL of the etcd started with --unsafe-no-fsync
	zkEnv          = "AQS_BENCH_ZK"           // host:port of the ZooKeeper server
)

// zkJar is where Debian's zookeeper package (the jars of zookeeperd, without its service)
// puts the server; its manifest's Class-Path names the jars it needs.
const zkJar = "/usr/share/java/zookeeper.jar"

// zkLogJar, when present (Debian's libslf4j-java, which zookeeper depends on), gives the
// server's SLF4J logging a destination: its log file, where a failed start says why.
const zkLogJar = "/usr/share/java/slf4j-simple.jar"

// peerServers are the peers' servers that the run started, and the peers it left out.
type peerServers struct {
	procs   []*server
	etcd    string   // etcd's version, "" when no etcd runs
	zk      string   // ZooKeeper's version, "" when it does not run
	leftOut []string // one sentence per peer left out, for the report
}

// startPeers starts the servers of the peers among cfg.impls, and takes out of cfg.impls the
// rows of a peer whose server is not installed. asked is whether -impls chose the rows: then
// a peer that cannot run is an error.
func startPeers(cfg *config) (*peerServers, error) {
	ps := &peerServers{}
	wants := func(variant int) bool {
		return slices.ContainsFunc(cfg.impls, func(i int) bool { return peerVariant(i) == variant })
	}
	leaveOut := func(variants []int, why string) error {
		if cfg.asked && slices.ContainsFunc(variants, wants) {
			return errors.New(why)
		}
		fmt.Fprintf(os.Stderr, "compare: %s: leaving out its rows\n", why)
		ps.leftOut = append(ps.leftOut, why)
		cfg.impls = slices.DeleteFunc(cfg.impls, func(i int) bool { return slices.Contains(variants, peerVariant(i)) })
		return nil
	}
	fail := func(err error) (*peerServers, error) {
		ps.stop()
		return nil, err
	}

	if wants(etcdFsync) || wants(etcdNoFsync) {
		bin, err := exec.LookPath("etcd")
		if err != nil {
			why := "etcd not found on PATH (Debian's etcd-server; make bench-compare installs it)"
			if err := leaveOut([]int{etcdFsync, etcdNoFsync}, why); err != nil {
				return fail(err)
			}
		} else {
			ps.etcd = etcdVersion(bin)
			for _, v := range []struct {
				variant int
				env     string
				flags   []string
			}{{etcdFsync, etcdFsyncEnv, nil}, {etcdNoFsync, etcdNoFsyncEnv, []string{"--unsafe-no-fsync"}}} {
				if !wants(v.variant) {
					continue
				}
				s, err := retryStart(func() (*server, error) { return startEtcd(bin, v.flags) })
				if err != nil {
					return fail(err)
				}
				ps.procs = append(ps.procs, s)
				os.Setenv(v.env, s.addr)
			}
		}
	}

	if wants(zkVariant) {
		java, err := exec.LookPath("java")
		if err == nil {
			_, err = os.Stat(zkJar)
		}
		if err != nil {
			why := "ZooKeeper not found (java on PATH and " + zkJar + ", from Debian's zookeeper; make bench-compare installs it)"
			if err := leaveOut([]int{zkVariant}, why); err != nil {
				return fail(err)
			}
		} else {
			s, err := retryStart(func() (*server, error) { return startZooKeeper(java) })
			if err != nil {
				return fail(err)
			}
			ps.procs = append(ps.procs, s)
			os.Setenv(zkEnv, s.addr)
			ps.zk = zkVersion(s.addr)
		}
	}
	return ps, nil
}

// stop kills every server started.
func (ps *peerServers) stop() {
	for _, s := range ps.procs {
		s.stop()
	}
	ps.procs = nil
}

// retryStart calls start up to five times: a port picked free can be taken before the
// server binds it.
func retryStart(start func() (*server, error)) (*server, error) {
	for attempt := 1; ; attempt++ {
		s, err := start()
		if err == nil || attempt == 5 {
			return s, err
		}
	}
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startProc starts bin with args in a new temporary directory, its output to log in that
// directory, and waits until ready says yes (or 20 seconds pass, or it exits). what names it
// in errors.
func startProc(what, bin string, args []string, dir, addr string, ready func(context.Context) bool) (*server, error) {
	logPath := filepath.Join(dir, "server.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &server{addr: addr, dir: dir, exited: make(chan struct{})}
	s.cmd = exec.Command(bin, args...)
	s.cmd.Dir = dir
	s.cmd.Stdout = logFile
	s.cmd.Stderr = logFile
	dieWithParent(s.cmd)
	err = s.cmd.Start()
	logFile.Close()
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	go func() {
		_ = s.cmd.Wait()
		close(s.exited)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		// A server that lost its port to another process exits; one that answers before
		// exiting is taken as ready only if it is still running after the answer.
		if ready(ctx) {
			select {
			case <-s.exited:
			default:
				return s, nil
			}
		}
		select {
		case <-s.exited:
			err = errors.New("it exited")
		case <-ctx.Done():
			err = errors.New("it did not answer within 20s")
		case <-time.After(50 * time.Millisecond):
			continue
		}
		tail := redisproc.LogTail(logPath, 2048)
		s.stop()
		return nil, fmt.Errorf("%s on %s did not start: %w\n--- its log ---\n%s", what, addr, err, tail)
	}
}

// startEtcd starts a single-member etcd on two free loopback ports (client and peer), with
// the shipped defaults but for flags.
func startEtcd(bin string, flags []string) (*server, error) {
	client, err := freePort()
	if err != nil {
		return nil, err
	}
	peer, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "aqs-bench-etcd-")
	if err != nil {
		return nil, err
	}
	clientURL := "http://127.0.0.1:" + strconv.Itoa(client)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peer)
	args := append([]string{
		"--name", "bench", "--data-dir", filepath.Join(dir, "data"), "--logger", "zap",
		"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "bench=" + peerURL,
	}, flags...)
	hc := &http.Client{Timeout: time.Second}
	return startProc("etcd", bin, args, dir, clientURL, func(ctx context.Context) bool {
		// /health answers true once the member has a leader (itself) and serves requests.
		req, _ := http.NewRequestWithContext(ctx, "GET", clientURL+"/health", nil)
		resp, err := hc.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK && strings.Contains(string(b), `"true"`)
	})
}

// etcdVersion returns the first line of etcd --version's answer, without its label.
func etcdVersion(bin string) string {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "(unknown version)"
	}
	first, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(strings.TrimPrefix(first, "etcd Version:"))
}

// startZooKeeper starts a standalone ZooKeeper server (QuorumPeerMain with a configuration of
// no peers, as zkServer.sh does) on a free loopback port, with the shipped defaults but for
// the ports: no admin server (a third port), and the four-letter word srvr, which says when
// it serves requests and its version. (ruok answers imok before the server serves: a client
// that connects then is turned away.)
func startZooKeeper(java string) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "aqs-bench-zookeeper-")
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	cfg := fmt.Sprintf("tickTime=2000\ndataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\n"+
		"maxClientCnxns=0\nadmin.enableServer=false\n4lw.commands.whitelist=srvr\n",
		filepath.Join(dir, "data"), port)
	cfgPath := filepath.Join(dir, "zoo.cfg")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	cp := zkJar
	if _, err := os.Stat(zkLogJar); err == nil {
		cp += ":" + zkLogJar
	}
	args := []string{"-cp", cp, "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
		"org.apache.zookeeper.server.quorum.QuorumPeerMain", cfgPath}
	return startProc("ZooKeeper", java, args, dir, addr, func(context.Context) bool {
		return zkVersion(addr) != ""
	})
}

// fourLetter sends one of ZooKeeper's four-letter commands and returns its answer.
func fourLetter(addr, cmd string) string {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return ""
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(c, cmd); err != nil {
		return ""
	}
	b, _ := io.ReadAll(c)
	return string(b)
}

// zkVersion returns the version that the server at addr reports, "" when it does not serve.
func zkVersion(addr string) string {
	sc := bufio.NewScanner(strings.NewReader(fourLetter(addr, "srvr")))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Zookeeper version: "); ok {
			v, _, _ = strings.Cut(v, ",")   // the build's hash and date follow
			v, _, _ = strings.Cut(v, "-${") // Debian's build leaves the hash's placeholder
			return v
		}
	}
	return ""
}
