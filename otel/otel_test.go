package aqsotel_test

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/redisproc"
	aqsotel "github.com/redaqs/aqs/otel"
	"github.com/redaqs/aqs/reentrant"
)

// redisServer starts a redis-server of the test's own (or the binary $REDIS_SERVER names) on a
// free loopback port and returns a client of it; both end with the test. This module keeps
// clear of the main module's internal/testkit/redistest and the test dependencies it brings.
func redisServer(t *testing.T) *redis.Client {
	t.Helper()
	bin, err := redisproc.Binary()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	cmd := exec.Command(bin, "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting redis-server: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	rdb := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port)})
	t.Cleanup(func() { _ = rdb.Close() })
	deadline := time.Now().Add(10 * time.Second)
	for delay := time.Millisecond; rdb.Ping(context.Background()).Err() != nil; delay *= 2 {
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on port %d did not answer within 10s", port)
		}
		time.Sleep(min(delay, 100*time.Millisecond)) // a pause between readiness checks
	}
	return rdb
}

func newClient(t *testing.T, rdb redis.UniversalClient, opts ...aqs.Option) *aqs.Client {
	t.Helper()
	c, err := aqs.New(context.Background(), rdb, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// tee passes every event to obs and then signals its kind on a channel, so that a test can
// wait for an event.
func tee(obs aqs.Observer) (aqs.Observer, <-chan aqs.EventKind) {
	ch := make(chan aqs.EventKind, 64)
	return aqs.ObserverFunc(func(e aqs.Event) {
		obs.Observe(e)
		ch <- e.Kind
	}), ch
}

func await(t *testing.T, ch <-chan aqs.EventKind, k aqs.EventKind) {
	t.Helper()
	for {
		select {
		case got := <-ch:
			if got == k {
				return
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no %v event within 10s", k)
		}
	}
}

// collect returns the metrics the reader has, by name.
func collect(t *testing.T, r sdkmetric.Reader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != aqsotel.ScopeName {
			t.Errorf("scope %q", sm.Scope.Name)
		}
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

func sum(t *testing.T, m metricdata.Metrics) (int64, attribute.Set) {
	t.Helper()
	s, ok := m.Data.(metricdata.Sum[int64])
	if !ok || len(s.DataPoints) != 1 {
		t.Fatalf("%s: %#v", m.Name, m.Data)
	}
	return s.DataPoints[0].Value, s.DataPoints[0].Attributes
}

func histogram[N int64 | float64](t *testing.T, m metricdata.Metrics) metricdata.HistogramDataPoint[N] {
	t.Helper()
	h, ok := m.Data.(metricdata.Histogram[N])
	if !ok || len(h.DataPoints) != 1 {
		t.Fatalf("%s: %#v", m.Name, m.Data)
	}
	return h.DataPoints[0]
}

// A contended acquisition, a release, a give-up, an error and a lost lease each land in
// their instrument, with the primitive and the name as attributes.
func TestObserverRecordsEachEventInItsInstrument(t *testing.T) {
	rdb := redisServer(t)
	reader := sdkmetric.NewManualReader()
	obs, err := aqsotel.New(aqsotel.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
	if err != nil {
		t.Fatal(err)
	}
	o, events := tee(obs)
	ctx := context.Background()
	holder, err := reentrant.New(newClient(t, rdb), "contended")
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, rdb, aqs.WithObserver(o), aqs.WithWatchdogTimeout(300*time.Millisecond))
	l, err := reentrant.New(c, "contended")
	if err != nil {
		t.Fatal(err)
	}

	held, err := holder.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := l.TryLock(ctx); ok || err != nil { // a give-up
		t.Fatalf("TryLock of a held lock: %v %v", ok, err)
	}
	got := make(chan error, 1)
	go func() {
		mine, err := l.Lock(ctx)
		if err == nil {
			err = l.Unlock(mine)
		}
		got <- err
	}()
	await(t, events, aqs.EventQueued)
	if err := holder.Unlock(held); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}

	broken, err := reentrant.New(c, "not-a-lock")
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, broken.Key(), "x", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := broken.Lock(ctx); err == nil { // an error
		t.Fatal("Lock of a key of another value succeeded")
	}

	held, err = l.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.Del(ctx, l.Key()).Err(); err != nil { // a lost lease, found by the watchdog
		t.Fatal(err)
	}
	await(t, events, aqs.EventLeaseLost)
	_ = l.Unlock(held)

	ms := collect(t, reader)
	want := attribute.NewSet(attribute.String("aqs.primitive", "reentrant"), attribute.String("aqs.name", "contended"))
	for name, n := range map[string]int64{"aqs.acquisitions": 2, "aqs.give_ups": 1, "aqs.leases.lost": 1} {
		v, attrs := sum(t, ms[name])
		if v != n || !attrs.Equals(&want) {
			t.Errorf("%s = %d %v, want %d %v", name, v, attrs.ToSlice(), n, want.ToSlice())
		}
	}
	if v, attrs := sum(t, ms["aqs.errors"]); v != 1 || attrs.Encoded(attribute.DefaultEncoder()) !=
		"aqs.name=not-a-lock,aqs.primitive=reentrant" {
		t.Errorf("aqs.errors = %d %v", v, attrs.ToSlice())
	}
	wait := histogram[float64](t, ms["aqs.acquire.wait"])
	if wait.Count != 2 || wait.Sum <= 0 || ms["aqs.acquire.wait"].Unit != "s" {
		t.Errorf("aqs.acquire.wait: %+v", wait)
	}
	hold := histogram[float64](t, ms["aqs.hold.duration"])
	if hold.Count != 1 || hold.Sum <= 0 || !hold.Attributes.Equals(&want) {
		t.Errorf("aqs.hold.duration: %+v", hold)
	}
	if q := histogram[int64](t, ms["aqs.queue.length"]); q.Count != 1 || q.Sum != 1 {
		t.Errorf("aqs.queue.length: %+v", q)
	}
}

// WithoutNames keeps the names out of the attributes.
func TestWithoutNamesKeepsTheNameOut(t *testing.T) {
	rdb := redisServer(t)
	reader := sdkmetric.NewManualReader()
	obs, err := aqsotel.New(aqsotel.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))),
		aqsotel.WithoutNames())
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, rdb, aqs.WithObserver(obs))
	for _, name := range []string{"a", "b"} {
		l, err := reentrant.New(c, name)
		if err != nil {
			t.Fatal(err)
		}
		held, err := l.Lock(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(held); err != nil {
			t.Fatal(err)
		}
	}
	v, attrs := sum(t, collect(t, reader)["aqs.acquisitions"])
	want := attribute.NewSet(attribute.String("aqs.primitive", "reentrant"))
	if v != 2 || !attrs.Equals(&want) {
		t.Errorf("aqs.acquisitions = %d %v", v, attrs.ToSlice())
	}
}

// The acquisition and the release land as events on the caller's span.
func TestObserverAddsEventsToTheCallersSpan(t *testing.T) {
	rdb := redisServer(t)
	obs, err := aqsotel.New(aqsotel.WithMeterProvider(sdkmetric.NewMeterProvider()))
	if err != nil {
		t.Fatal(err)
	}
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	l, err := reentrant.New(newClient(t, rdb, aqs.WithObserver(obs)), "spans")
	if err != nil {
		t.Fatal(err)
	}
	ctx, span := tp.Tracer("test").Start(context.Background(), "request")
	held, err := l.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(held); err != nil {
		t.Fatal(err)
	}
	span.End()

	ended := sr.Ended()
	if len(ended) != 1 {
		t.Fatalf("%d spans ended", len(ended))
	}
	evs := ended[0].Events()
	if len(evs) != 2 || evs[0].Name != "aqs.acquired" || evs[1].Name != "aqs.released" {
		t.Fatalf("span events %+v", evs)
	}
	attrs := attribute.NewSet(evs[0].Attributes...)
	if v, _ := attrs.Value("aqs.primitive"); v.AsString() != "reentrant" {
		t.Errorf("aqs.acquired: %v", evs[0].Attributes)
	}
	if v, _ := attrs.Value("aqs.name"); v.AsString() != "spans" {
		t.Errorf("aqs.acquired: %v", evs[0].Attributes)
	}
	if v, ok := attrs.Value("aqs.wait"); !ok || v.AsFloat64() <= 0 {
		t.Errorf("aqs.acquired: %v", evs[0].Attributes)
	}
	released := attribute.NewSet(evs[1].Attributes...)
	if v, ok := released.Value("aqs.hold"); !ok || v.AsFloat64() <= 0 {
		t.Errorf("aqs.released: %v", evs[1].Attributes)
	}
}
