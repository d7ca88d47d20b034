package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/outboxkit/outboxkit/outbox"
)

// steadyResult is one row of the latency table.
type steadyResult struct {
	db, relay string
	// relays is how many relay processes of the same lease group shared the outbox.
	relays int
	keys   int
	events int
	// written is the rate the writers committed at (transactions per second from the first
	// write to the last commit): below o.rate when commits took longer than the rate allows.
	written float64
	p50     time.Duration
	p99     time.Duration
	cpu     time.Duration
	rssMiB  float64
	// recvP50 and recvP99 are the cdc relay's receive lag (commit to its arrival on the
	// stream, from outboxkit_cdc_receive_lag_seconds); hasRecv says they were reported.
	recvP50, recvP99 time.Duration
	hasRecv          bool
	// quantiles are the latencies at the relays plot's quantiles (latencyQuantiles).
	quantiles []time.Duration
}

// steady writes single-event transactions at o.rate for o.seconds, from o.writers concurrent
// writers sharing the rate, with relays relay processes running (one lease group), and measures
// commit-to-consume latency (an upper bound of commit-to-broker-ack). The relays are started
// one after another, and the writes begin 2 s after the last: the run includes the partitions'
// moves between relays that follow each start, as a rolling deployment does.
func steady(db *sql.DB, d database, o options, relay string, relays, size, keys int) (steadyResult, error) {
	name, topic, write, err := setup(db, d, relay)
	if err != nil {
		return steadyResult{}, err
	}
	defer cleanup(db, d, relay, name)
	consumer, err := newSource(relay, o, topic)
	if err != nil {
		return steadyResult{}, err
	}
	defer consumer.close()
	var children []*child
	stopAll := func() (cpu time.Duration, rss float64, err error) {
		for _, c := range children {
			ccpu, crss, cerr := c.stop()
			cpu, rss, err = cpu+ccpu, rss+crss, errors.Join(err, cerr)
		}
		return cpu, rss, err
	}
	for range relays {
		c, err := startChild(relay, d, name, o)
		if err != nil {
			_, _, stopErr := stopAll()
			return steadyResult{}, errors.Join(err, stopErr)
		}
		children = append(children, c)
	}
	time.Sleep(2 * time.Second) // let the relays start before measuring
	total := o.rate * o.seconds
	writeErr := make(chan error, 1)
	var wrote time.Duration
	go func() {
		var err error
		wrote, err = writeSteadily(d, o, write, topic, size, keys)
		writeErr <- err
	}()
	consumeCtx, cancel := children[0].watch(time.Duration(o.seconds)*time.Second + 2*time.Minute)
	got, latencies, err := consumeN(consumeCtx, consumer, total, true)
	cancel()
	cpu, rss, childErr := stopAll()
	if err != nil {
		return steadyResult{}, errors.Join(err, childErr)
	}
	if err := <-writeErr; err != nil {
		return steadyResult{}, err
	}
	slices.Sort(latencies)
	r := steadyResult{db: d.label, relay: relay, relays: relays, keys: keys, events: got, written: float64(total) / wrote.Seconds(),
		p50: latencies[len(latencies)/2], p99: latencies[len(latencies)*99/100], cpu: cpu, rssMiB: rss,
		quantiles: latencyQuantiles(latencies)}
	r.recvP50, r.recvP99, r.hasRecv = parseReceiveLag(children[0].output())
	return r, nil
}

// writeSteadily writes o.rate*o.seconds single-event transactions from o.writers goroutines,
// each at its share of o.rate; event i goes to key i % keys. A transaction the database chose
// as a deadlock victim (concurrent writers of one key) is written again. It returns the time
// from the first write to the last commit.
func writeSteadily(d database, o options, write writeFunc, topic string, size, keys int) (time.Duration, error) {
	total := o.rate * o.seconds
	writers := max(o.writers, 1)
	interval := time.Second * time.Duration(writers) / time.Duration(o.rate)
	errs := make([]error, writers)
	began := time.Now()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			ctx := context.Background()
			next := time.Now().Add(interval * time.Duration(w) / time.Duration(writers))
			for i := w; i < total; i += writers {
				if d := time.Until(next); d > 0 {
					time.Sleep(d)
				}
				err := writeRetryingDeadlocks(func() error {
					return write(ctx, []outbox.Event{makeEvent(topic, i, keys, size, true)})
				})
				if err != nil {
					errs[w] = fmt.Errorf("writer %d: write event %d on %s: %w", w, i, d.label, err)
					return
				}
				next = next.Add(interval)
			}
		})
	}
	wg.Wait()
	return time.Since(began), errors.Join(errs...)
}
