// Package aqsotel turns the events of an aqs Client into OpenTelemetry metrics and span
// events. It is a module of its own, so that users of aqs download OpenTelemetry only when
// they import it:
//
//	obs, err := aqsotel.New()
//	...
//	client, err := aqs.New(ctx, rdb, aqs.WithObserver(obs))
//
// # Metrics
//
// Every instrument carries the attributes aqs.primitive ("reentrant", "fair", "rwlock-read",
// "rwlock-write", "semaphore", "leased-semaphore", "latch") and aqs.name (the primitive's name; left
// out with WithoutNames, for deployments with many names):
//
//	aqs.acquire.wait      histogram, s          the wait of each successful acquisition
//	aqs.hold.duration     histogram, s          the time from each acquisition to its last release
//	aqs.queue.length      histogram, {waiter}   the queue's length when a call joined it, where
//	                                            the primitive reports it (see aqs.EventQueued)
//	aqs.acquisitions      counter, {acquisition}
//	aqs.give_ups          counter, {call}       calls that ended without it: context done, wait
//	                                            bound run out, or a try that found it taken
//	aqs.errors            counter, {call}       acquiring calls that failed with an error
//	aqs.leases.lost       counter, {hold}       holds found lost
//
// # Span events
//
// Each event is also added to the recording span of the event's context (see aqs.Event's
// Context), if there is one: "aqs.queued", "aqs.acquired", "aqs.gave_up", "aqs.failed",
// "aqs.released" and "aqs.lease_lost", with the same attributes, the wait or hold time in
// seconds (aqs.wait, aqs.hold), the queue's length (aqs.queue.length) when known, and the
// error's text (exception.message) when there is one. A lost lease is found on the Client's
// watchdog goroutine with the acquiring call's context, whose span has often ended: its span
// event is then dropped, its metrics are not.
package aqsotel

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/redaqs/aqs"
)

// ScopeName is the instrumentation scope of the meter.
const ScopeName = "github.com/redaqs/aqs/otel"

// Option configures an Observer.
type Option func(*config)

type config struct {
	mp         metric.MeterProvider
	names      bool
	spanEvents bool
}

// WithMeterProvider sets where the metrics go. The default is the global MeterProvider
// (otel.GetMeterProvider) at the time of New.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.mp = mp }
}

// WithoutNames leaves the aqs.name attribute out of the metrics and span events, so that
// their cardinality is bounded by the kinds of primitive rather than by the names in use. The
// default is to include it.
func WithoutNames() Option {
	return func(c *config) { c.names = false }
}

// WithoutSpanEvents turns the span events off, leaving the metrics. The default is on.
func WithoutSpanEvents() Option {
	return func(c *config) { c.spanEvents = false }
}

// Observer is an aqs.Observer that records the Client's events as metrics and span events.
// It is safe for concurrent use, and its Observe never blocks.
type Observer struct {
	names, spanEvents bool

	wait, hold                               metric.Float64Histogram
	queueLen                                 metric.Int64Histogram
	acquisitions, giveUps, errors, leaseLost metric.Int64Counter

	sets sync.Map // attrKey -> metric.MeasurementOption, built once per primitive and name
}

var _ aqs.Observer = (*Observer)(nil)

type attrKey struct{ primitive, name string }

// New returns an Observer, having created its instruments. It fails only when the
// MeterProvider refuses an instrument.
func New(opts ...Option) (*Observer, error) {
	c := config{names: true, spanEvents: true}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	m := c.mp.Meter(ScopeName)
	o := &Observer{names: c.names, spanEvents: c.spanEvents}
	var err error
	if o.wait, err = m.Float64Histogram("aqs.acquire.wait", metric.WithUnit("s"),
		metric.WithDescription("The time from an acquiring call to its acquisition.")); err != nil {
		return nil, err
	}
	if o.hold, err = m.Float64Histogram("aqs.hold.duration", metric.WithUnit("s"),
		metric.WithDescription("The time from an acquisition to the last release of its hold.")); err != nil {
		return nil, err
	}
	if o.queueLen, err = m.Int64Histogram("aqs.queue.length", metric.WithUnit("{waiter}"),
		metric.WithDescription("The length of the queue when a call joined it.")); err != nil {
		return nil, err
	}
	for _, c := range []struct {
		dst        *metric.Int64Counter
		name, unit string
		desc       string
	}{
		{&o.acquisitions, "aqs.acquisitions", "{acquisition}", "Successful acquiring calls."},
		{&o.giveUps, "aqs.give_ups", "{call}", "Acquiring calls that ended without it and without an error."},
		{&o.errors, "aqs.errors", "{call}", "Acquiring calls that failed with an error."},
		{&o.leaseLost, "aqs.leases.lost", "{hold}", "Holds found lost."},
	} {
		if *c.dst, err = m.Int64Counter(c.name, metric.WithUnit(c.unit), metric.WithDescription(c.desc)); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// Observe records e. It is called by the aqs Client (see aqs.Observer).
func (o *Observer) Observe(e aqs.Event) {
	ctx := e.Context
	if ctx == nil {
		ctx = context.Background()
	}
	set := o.attrs(e)
	switch e.Kind {
	case aqs.EventAcquired:
		o.acquisitions.Add(ctx, 1, set)
		o.wait.Record(ctx, e.Wait.Seconds(), set)
	case aqs.EventQueued:
		if e.QueueLen > 0 {
			o.queueLen.Record(ctx, int64(e.QueueLen), set)
		}
	case aqs.EventGaveUp:
		o.giveUps.Add(ctx, 1, set)
	case aqs.EventFailed:
		o.errors.Add(ctx, 1, set)
	case aqs.EventReleased:
		o.hold.Record(ctx, e.Hold.Seconds(), set)
	case aqs.EventLeaseLost:
		o.leaseLost.Add(ctx, 1, set)
	}
	if o.spanEvents {
		o.spanEvent(e)
	}
}

// attrs returns the measurement option with e's attributes, made once per primitive and name.
func (o *Observer) attrs(e aqs.Event) metric.MeasurementOption {
	k := attrKey{primitive: e.Primitive}
	if o.names {
		k.name = e.Name
	}
	if v, ok := o.sets.Load(k); ok {
		return v.(metric.MeasurementOption)
	}
	kv := []attribute.KeyValue{attribute.String("aqs.primitive", k.primitive)}
	if o.names {
		kv = append(kv, attribute.String("aqs.name", k.name))
	}
	v, _ := o.sets.LoadOrStore(k, metric.WithAttributeSet(attribute.NewSet(kv...)))
	return v.(metric.MeasurementOption)
}

// spanNames are the span events' names by kind.
var spanNames = map[aqs.EventKind]string{
	aqs.EventAcquired: "aqs.acquired", aqs.EventQueued: "aqs.queued", aqs.EventGaveUp: "aqs.gave_up",
	aqs.EventFailed: "aqs.failed", aqs.EventReleased: "aqs.released", aqs.EventLeaseLost: "aqs.lease_lost",
}

// spanEvent adds e to the recording span of its context, if any.
func (o *Observer) spanEvent(e aqs.Event) {
	if e.Context == nil {
		return
	}
	span := trace.SpanFromContext(e.Context)
	if !span.IsRecording() {
		return
	}
	kv := make([]attribute.KeyValue, 0, 5)
	kv = append(kv, attribute.String("aqs.primitive", e.Primitive))
	if o.names {
		kv = append(kv, attribute.String("aqs.name", e.Name))
	}
	switch e.Kind {
	case aqs.EventReleased, aqs.EventLeaseLost:
		kv = append(kv, attribute.Float64("aqs.hold", e.Hold.Seconds()))
	default:
		kv = append(kv, attribute.Float64("aqs.wait", e.Wait.Seconds()))
	}
	if e.QueueLen > 0 {
		kv = append(kv, attribute.Int("aqs.queue.length", e.QueueLen))
	}
	if e.Reentry {
		kv = append(kv, attribute.Bool("aqs.reentry", true))
	}
	if e.Err != nil {
		kv = append(kv, attribute.String("exception.message", e.Err.Error()))
	}
	span.AddEvent(spanNames[e.Kind], trace.WithAttributes(kv...))
}
