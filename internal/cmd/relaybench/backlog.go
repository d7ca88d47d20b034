package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	wforwarder "github.com/ThreeDotsLabs/watermill/components/forwarder"
	"github.com/ThreeDotsLabs/watermill/message"
	_ "github.com/go-sql-driver/mysql"
	"github.com/google/uuid"
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// connections holds one *sql.DB per measured database, opened and pinged before any
// measurement so a missing service fails the run at once.
type connections map[string]*sql.DB

func openAll(o options) (connections, error) {
	conns := connections{}
	for _, d := range o.dbs {
		db, err := sql.Open(d.driver, d.dsn)
		if err != nil {
			conns.close()
			return nil, fmt.Errorf("open %s: %w", d.label, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = db.PingContext(ctx)
		cancel()
		if err != nil {
			_ = db.Close()
			conns.close()
			flagName := "-pg"
			if d.name == "mysql" {
				flagName = "-mysql"
			}
			return nil, fmt.Errorf("connect to %s (%s or its environment variable): %w", d.label, flagName, err)
		}
		conns[d.name] = db
	}
	return conns, nil
}

func (c connections) get(name string) *sql.DB { return c[name] }

func (c connections) close() {
	for _, db := range c {
		_ = db.Close()
	}
}

// notAvailableError says that a relay cannot run on a database at all, for the reason given:
// its row is printed as n/a with the reason in a footnote instead of failing the run.
type notAvailableError struct{ reason string }

func (e *notAvailableError) Error() string { return "not available: " + e.reason }

func asNotAvailable(err error, target **notAvailableError) bool { return errors.As(err, target) }

// writeFunc writes events in one transaction.
type writeFunc func(ctx context.Context, events []outbox.Event) error

// setup prepares an empty outbox (outboxkit and ceiling: the outbox table written by
// outbox.Writer) or forwarder topic (stock) and returns the name to pass to the child, the
// Kafka topic of the events and a function that writes events in one transaction.
func setup(db *sql.DB, d database, relay string) (name, topic string, write writeFunc, err error) {
	ctx := context.Background()
	name = testsupport.UniqueName("bench")
	topic = testsupport.UniqueName("bench_events")
	role, _ := baseOf(relay)
	switch role {
	case relayWALCeiling, relayWAL, relayWALExactlyOnce:
		write, err := walSetup(ctx, db, d, relay, name)
		return name, topic, write, err
	case relayOutboxkit, relayExactlyOnce, relayCeiling, relayCDC, relayCDCExactlyOnce, relayCDCCeiling, relayPulsar, relayNATS, relayRabbitMQ,
		relaySQLWriters, relayAvro, relayProtobuf:
		if isCDC(relay) && d.dialect != outbox.Postgres {
			return "", "", nil, &notAvailableError{reason: "the cdc source needs PostgreSQL"}
		}
		w, err := outbox.NewWriter(outbox.Config{Dialect: d.dialect, Table: name, DisableKeyLocks: isCDC(relay)})
		if err != nil {
			return "", "", nil, fmt.Errorf("outbox writer: %w", err)
		}
		if err := outbox.Migrate(ctx, db, w.Table()); err != nil {
			return "", "", nil, fmt.Errorf("migrate outbox table %s: %w", name, err)
		}
		if isCDC(relay) {
			if err := cdcSettings(ctx, db, w.Table()); err != nil {
				return "", "", nil, fmt.Errorf("cdc settings of %s: %w", name, err)
			}
		}
		if role == relaySQLWriters {
			return name, topic, plainWriteFunc(db, d, name), nil
		}
		return name, topic, func(ctx context.Context, events []outbox.Event) error {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			if err := w.WriteTx(ctx, tx, events...); err != nil {
				_ = tx.Rollback()
				return err
			}
			return tx.Commit()
		}, nil
	case relayStock:
		schema, offsets := stockAdapters(d)
		if err := initStockSchema(db, schema, offsets, name); err != nil {
			return "", "", nil, fmt.Errorf("watermill-sql schema for %s: %w", name, err)
		}
		return name, topic, func(ctx context.Context, events []outbox.Event) error {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			sqlPub, err := wsql.NewPublisher(wsql.TxFromStdSQL(tx), wsql.PublisherConfig{SchemaAdapter: schema}, nil)
			if err != nil {
				_ = tx.Rollback()
				return err
			}
			pub := wforwarder.NewPublisher(sqlPub, wforwarder.PublisherConfig{ForwarderTopic: name})
			msgs := make([]*message.Message, len(events))
			for i, e := range events {
				msgs[i] = e.ToMessage()
			}
			if err := pub.Publish(topic, msgs...); err != nil {
				_ = tx.Rollback()
				return err
			}
			return tx.Commit()
		}, nil
	}
	return "", "", nil, fmt.Errorf("unknown relay %q", relay)
}

// stockAdapters returns watermill-sql's default schema and offsets adapters of the database.
func stockAdapters(d database) (wsql.SchemaAdapter, wsql.OffsetsAdapter) {
	if d.dialect == outbox.MySQL {
		return wsql.DefaultMySQLSchema{}, wsql.DefaultMySQLOffsetsAdapter{}
	}
	return wsql.DefaultPostgreSQLSchema{}, wsql.DefaultPostgreSQLOffsetsAdapter{}
}

func initStockSchema(db *sql.DB, schema wsql.SchemaAdapter, offsets wsql.OffsetsAdapter, name string) error {
	sub, err := wsql.NewSubscriber(wsql.BeginnerFromStdSQL(db), wsql.SubscriberConfig{
		SchemaAdapter: schema, OffsetsAdapter: offsets, InitializeSchema: true, ConsumerGroup: "bench",
	}, nil)
	if err != nil {
		return err
	}
	defer sub.Close()
	return sub.SubscribeInitialize(name)
}

func cleanup(db *sql.DB, d database, relay, name string) {
	quote := func(s string) string { return `"` + s + `"` }
	if d.dialect == outbox.MySQL {
		quote = func(s string) string { return "`" + s + "`" }
	}
	if relay == relayStock {
		_, _ = db.Exec("DROP TABLE IF EXISTS " + quote("watermill_"+name))
		_, _ = db.Exec("DROP TABLE IF EXISTS " + quote("watermill_offsets_"+name))
		return
	}
	if isCDC(relay) {
		if table, err := outbox.NewTable(d.dialect, name); err == nil {
			dropCDC(db, table)
		}
	}
	if isWAL(relay) && d.dialect == outbox.Postgres {
		dropWALCeiling(db, name)
	}
	for _, suffix := range []string{"", "_leases", "_relays", "_migrations", "_key_locks"} {
		_, _ = db.Exec("DROP TABLE IF EXISTS " + quote(name+suffix))
	}
	if d.dialect == outbox.Postgres {
		_, _ = db.Exec("DROP FUNCTION IF EXISTS " + name + "_notify(), " + name + "_prepare(), " + name + "_key_hash(text, text, text)")
	}
}

// makeEvent returns an event with a payload of random hex text (it compresses about 2x, like
// typical JSON), optionally stamped with the current time in its first 8 bytes.
func makeEvent(topic string, i, keys, size int, stamp bool) outbox.Event {
	raw := make([]byte, (size+1)/2)
	_, _ = rand.Read(raw)
	payload := []byte(hex.EncodeToString(raw))[:size]
	if stamp {
		binary.BigEndian.PutUint64(payload, uint64(time.Now().UnixNano()))
	}
	return outbox.Event{ID: uuid.Must(uuid.NewV7()), Topic: topic, AggregateType: "order",
		AggregateID: "order-" + strconv.Itoa(i%keys), EventType: "OrderChanged", Payload: payload}
}

// sample is one measured drain.
type sample struct {
	events  int
	seconds float64
	cpu     time.Duration
	rssMiB  float64
	// decodeRate is what pg_recvlogical decoded per second from a copy of the slot, on the same
	// rows (cdc drains only).
	decodeRate float64
	// cores are the cores each kind of process ran during the drain (coresBetween).
	cores map[string]float64
	// firstEvent is when the first event arrived, from the relay's go: the relay's start-up and
	// the first batch's way through, inside the drain's time.
	firstEvent time.Duration
	// registryRequests is how many HTTP requests a schema relay's registry client sent over its
	// run (hasRegistry: it reported them).
	registryRequests int
	hasRegistry      bool
}

// firstArrival is a source that notes when the first record arrived.
type firstArrival struct {
	source
	at time.Time
}

func (f *firstArrival) poll(ctx context.Context) []record {
	out := f.source.poll(ctx)
	if len(out) > 0 && f.at.IsZero() {
		f.at = time.Now()
	}
	return out
}

func (s sample) rate() float64 { return float64(s.events) / s.seconds }

// drain pre-fills a backlog of o.events events over the given number of keys, starts the relay
// process and times it until the last event is consumed from Kafka.
func drain(db *sql.DB, d database, o options, relay string, size, keys int) (sample, error) {
	name, topic, write, err := setup(db, d, relay)
	if err != nil {
		if relay == relayStock && d.dialect == outbox.MySQL {
			return sample{}, &notAvailableError{reason: "watermill-sql's MySQL schema could not be created on " + d.label + ": " + err.Error()}
		}
		return sample{}, err
	}
	defer cleanup(db, d, relay, name)
	ctx := context.Background()
	schemaID, err := registerSchema(ctx, o, relay, topic)
	if err != nil {
		return sample{}, err
	}
	var written map[string][]byte // the schema relays' payloads, to check one decodes back
	if schemaID != 0 {
		written = make(map[string][]byte, o.events)
	}
	for start := 0; start < o.events; start += 500 {
		batch := make([]outbox.Event, 0, 500)
		for i := start; i < min(start+500, o.events); i++ {
			e := makeEvent(topic, i, keys, size, false)
			if o.hasSchemaRelay() {
				e.Payload = jsonPayload(e.AggregateID, i, size, e.Payload)
			}
			if written != nil {
				written[e.ID.String()] = e.Payload
			}
			batch = append(batch, e)
		}
		if err := writeRetryingDeadlocks(func() error { return write(ctx, batch) }); err != nil {
			return sample{}, fmt.Errorf("fill backlog: %w", err)
		}
	}
	var ceilingSlot, end string
	var table outbox.Table
	if relay == relayCDC { // the decode ceiling is measured beside the at-least-once cdc drain only
		if table, err = outbox.NewTable(d.dialect, name); err != nil {
			return sample{}, err
		}
		if ceilingSlot, end, err = copySlot(ctx, db, table); err != nil {
			return sample{}, err
		}
	}
	consumer, err := newSource(relay, o, topic)
	if err != nil {
		return sample{}, err
	}
	defer consumer.close()
	var framed *framedSource
	if schemaID != 0 {
		if framed, err = newFramedSource(consumer, o, schemaID, written); err != nil {
			return sample{}, err
		}
		consumer = framed
	}
	child, err := startChild(relay, d, name, o)
	if err != nil {
		return sample{}, err
	}
	coresFrom := time.Now() // the readings' own time is in the window they are divided by
	procsBefore := readProcTimes(child.cmd.Process.Pid)
	began := time.Now()
	consumeCtx, cancel := child.watch(10 * time.Minute)
	timed := &firstArrival{source: consumer}
	got, _, err := consumeN(consumeCtx, timed, o.events, false)
	elapsed := time.Since(began)
	procsAfter := readProcTimes(child.cmd.Process.Pid)
	cores := coresBetween(procsBefore, procsAfter, time.Since(coresFrom))
	cancel()
	cpu, rss, childErr := child.stop()
	if err != nil {
		return sample{}, errors.Join(err, childErr)
	}
	s := sample{events: got, seconds: elapsed.Seconds(), cpu: cpu, rssMiB: rss, cores: cores, firstEvent: timed.at.Sub(began)}
	if framed != nil {
		if framed.err != nil {
			return sample{}, fmt.Errorf("what the %s relay published: %w", relay, framed.err)
		}
		if s.registryRequests, s.hasRegistry = parseRegistryRequests(child.output()); !s.hasRegistry {
			return sample{}, fmt.Errorf("the %s relay child reported no registry requests", relay)
		}
	}
	if relay == relayCDC {
		// After the relay: the two never compete for the machine.
		_, pub, err := cdcNames(ctx, db, table)
		if err != nil {
			return s, err
		}
		if s.decodeRate, err = decodeCeiling(ctx, d, pub, ceilingSlot, end, o.events); err != nil {
			return sample{}, err
		}
	}
	return s, nil
}

func newConsumer(brokers []string, topic string) (*kgo.Client, error) {
	return kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(50*time.Millisecond),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), // as exactly-once consumers must; the same for the others
		kgo.AllowAutoTopicCreation())
}

// kafkaSource reads a Kafka topic from its start.
type kafkaSource struct{ client *kgo.Client }

func (k kafkaSource) poll(ctx context.Context) []record {
	var out []record
	k.client.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
		id := ""
		for _, h := range r.Headers {
			if h.Key == outbox.MetadataEventID || h.Key == "_watermill_message_uuid" {
				id = string(h.Value)
			}
		}
		out = append(out, record{id: id, value: r.Value})
	})
	return out
}

func (k kafkaSource) close() { k.client.Close() }

// consumeN reads until n distinct events arrived; with stamped payloads it also returns each
// event's latency since the commit time written into its first 8 bytes.
// It stops early when ctx ends.
func consumeN(ctx context.Context, src source, n int, stamped bool) (int, []time.Duration, error) {
	seen := make(map[string]bool, n)
	var latencies []time.Duration
	for len(seen) < n {
		records := src.poll(ctx)
		if ctx.Err() != nil {
			return len(seen), latencies, fmt.Errorf("only %d of %d events arrived: %w", len(seen), n, context.Cause(ctx))
		}
		now := time.Now()
		for _, r := range records {
			if seen[r.id] {
				continue
			}
			seen[r.id] = true
			if stamped && len(r.value) >= 8 {
				latencies = append(latencies, now.Sub(time.Unix(0, int64(binary.BigEndian.Uint64(r.value)))))
			}
		}
	}
	return len(seen), latencies, nil
}
