package faultinject

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/outboxkit/outboxkit/outbox"
)

// Config sizes a fault-injection run. Zero values take the defaults in the comments.
type Config struct {
	// Broker is the dedicated broker to use (Kind, ports, state directory). Required: Kind and
	// RepoRoot.
	Broker Broker
	// Dialect is the database: outbox.Postgres or outbox.MySQL (MariaDB, MySQL 8). Default
	// outbox.Postgres.
	Dialect outbox.Dialect
	// DSN is the database: a postgres:// URL (or key=value DSN) for PostgreSQL, a
	// go-sql-driver/mysql DSN for MySQL. Required.
	DSN string
	// Delivery is the relays' forwarder.delivery: "" or at_least_once, or exactly_once (Kafka
	// only), under which a duplicate is a broken guarantee. The consumer reads read_committed
	// either way.
	Delivery string
	// Source is the relays' forwarder.source: "" or polling, or cdc (PostgreSQL only: one relay
	// streams the slot, the others stand by), or wal (PostgreSQL only: the writers emit logical
	// decoding messages, docs/wal.md; see walrun.go).
	Source string
	// WALSlot is the wal source's replication slot (Source wal): created before the writers
	// start with `outboxkit wal-slot create`, given to the relays as forwarder.wal_slot, and
	// dropped with its publication at the end. Default: a name of the run's own.
	WALSlot string
	// DiscardAt (with PoisonEvents) is the share of Events at which the run discards, as an
	// operator does, the poison events that are dead by then, while the writers go on: the
	// writers keep writing past Events until that discard is done, so the keys it releases
	// always drain under load (past Events, each writer commits a transaction every 250 ms
	// until then). It first waits until every poison event committed so far is
	// dead (at most DrainTimeout). Default 0: the dead poison events are discarded once, after
	// the writes.
	DiscardAt float64
	// Binary is the outboxkit CLI; empty builds ./cmd/outboxkit into a temporary directory.
	Binary string

	// The deployment shape (the defaults are the shape the plain run tests: one installation,
	// a generated lower-case table name, every payload under the broker's limit).

	// Installations is the number of services sharing the database server and the broker:
	// each has a PostgreSQL schema of its own, reached through its DSN's search_path, with the
	// outbox table named Table (default outbox_events) unqualified, its own writers' keys and
	// Relays relays of its own, all with the default lease group and (exactly once) the default
	// transactional-id prefix, into the same topic (the ledger tells them apart by event id).
	// Default 1: the run's tables in the DSN's own schema. More than 1 needs PostgreSQL.
	Installations int
	// Table is the outbox table as a user writes it in database.table: for example
	// "OrdersOutbox" (PostgreSQL folds the unquoted name to ordersoutbox) or
	// "ShopApp.OrdersOutbox" (the schema is created if missing, and then dropped at the end).
	// Default: a generated lower-case name, or outbox_events with several installations. The
	// run refuses nothing here: a name outbox.NewTable refuses fails the run.
	Table string
	// PoisonEvents is how many events over the broker's message limit the writers commit,
	// spread over the run, each on a live key: each must end dead-lettered (status dead in the
	// table) within MaxAttempts, and the other events of its key arrive after it. Default 0.
	PoisonEvents int
	// PoisonBytes is the size of a poison event's payload (random base64 text, which
	// compression cannot bring under the limit). Default 2 MiB for Kafka (its default limit is
	// 1 MiB), 8 MiB for Pulsar (5 MiB).
	PoisonBytes int
	// CalmEvents is how many events are committed after every fault is over (after the
	// writes of Events), with the relays left alone: a relay restart or takeover catches up on
	// the pending rows, which can hide a steady path (the cdc stream) that relays nothing.
	// Default 0.
	CalmEvents int
	// Schema turns on registry encoding: SchemaAvro registers the events' Avro schema under
	// the topic's subject in the registry at RegistryURL, the relays encode every event with it
	// (schema_registry), and the consumer decodes each message back with brokers/schema's
	// Decoder. PoisonEvents are then events whose JSON breaks the schema (a wrong type or a
	// missing required field): each must be dead-lettered, its dead letter naming the field path.
	// Kafka only, at least once. Default "": the relays publish the stored bytes.
	Schema string
	// RegistryURL is the Confluent-compatible registry's base URL (for Apicurio, its
	// /apis/ccompat/v7). Required with Schema.
	RegistryURL string
	// Scheduled is the share of the transactions that also write an event scheduled 2-5 s
	// ahead by the database's clock (docs/scheduled.md); some transactions cancel one, their own
	// or one committed earlier. The checker holds the scheduled events' rules (scheduled.go).
	// Kafka, the polling source (not yet tried with cdc) and outbox.Writer only. Default 0: none.
	Scheduled float64
	// DueGrid, in the scheduled variant, rounds every scheduled event's delivery time up to a
	// multiple of DueGrid (by the database's clock), so that batches of events, some of one key,
	// come due at the same instant; and each SIGKILL is timed to land around such an instant
	// (between DueGrid/10 before and DueGrid/5 after one at which written events come due).
	// What the checker verifies does not depend on where a kill lands. Default 0: delivery
	// times to the microsecond, kills at random points.
	DueGrid time.Duration
	// MaxAttempts is the relays' forwarder.max_attempts. Default 1000 (no event of the plain
	// run may be dead-lettered by the faults); set it low (3) with PoisonEvents.
	MaxAttempts int

	// Events is how many events the writers commit. Default 3000.
	Events int
	// Keys is the number of aggregates the events are spread over. Default 200.
	Keys int
	// Writers is the number of concurrent writer goroutines. Default 4.
	Writers int
	// SQLWriters makes the writers write by plain INSERT statements, one per event, leaving
	// key_hash to the table's trigger as a service in another language does (docs/writers.md),
	// instead of through outbox.Writer. PostgreSQL and MySQL only.
	SQLWriters bool
	// MixedWriters, with SQLWriters, gives every other writer (the odd-numbered ones)
	// outbox.Writer instead: plain-SQL and Go writers commit events of the same keys concurrently.
	MixedWriters bool
	// Rate caps the committed events per second (all writers together); 0 means as fast as
	// possible. Default 0.
	Rate int
	// RollbackShare is the share of transactions rolled back on purpose. Default 0.1.
	RollbackShare float64
	// Relays is the number of relay processes. Default 3.
	Relays int
	// Kills is how many times a relay is SIGKILLed. Default 6.
	Kills int
	// Pauses is how many times a relay is SIGSTOPped, then SIGCONTed after a random duration
	// between LeaseTTL/2 and 4 x LeaseTTL; the first pause and every other one after it last
	// more than 3 x LeaseTTL, and for those the relay's partitions must move to the others
	// within TakeoverBound. Default 2.
	Pauses int
	// BrokerRestarts is how many times the broker is restarted (unless NoBrokerRestart): once at
	// 35 % of the writes, or spread from 20 % to 70 %. A KafkaCluster restarts one node at a
	// time, in turn (Broker.RestartOne). Default 1.
	BrokerRestarts int
	// NoBrokerRestart, NoDBCut and NoPauses turn those faults off.
	NoBrokerRestart, NoDBCut, NoPauses bool
	// LeaseTTL is the relays' forwarder.lease_ttl (their heartbeat is the CLI's default,
	// LeaseTTL/4). Default 2s.
	LeaseTTL time.Duration
	// BrokerDowntime is how long the broker stays down when it is restarted. Default 2s.
	BrokerDowntime time.Duration
	// DrainTimeout bounds the wait for the last events after the writers are done. Default 3m.
	DrainTimeout time.Duration
	// Seed makes the random choices repeatable; 0 picks one.
	Seed uint64
	// Keep leaves the tables, the relays' config and logs in place.
	Keep bool
	// Logf receives progress lines. Default: none.
	Logf func(format string, args ...any)
}

func (c *Config) setDefaults() {
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	if c.Dialect == "" {
		c.Dialect = outbox.Postgres
	}
	def(&c.Events, 3000)
	def(&c.Keys, 200)
	def(&c.Writers, 4)
	def(&c.Relays, 3)
	def(&c.Kills, 6)
	def(&c.Pauses, 2)
	def(&c.BrokerRestarts, 1)
	def(&c.Installations, 1)
	def(&c.MaxAttempts, 1000)
	if c.RollbackShare == 0 {
		c.RollbackShare = 0.1
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = 2 * time.Second
	}
	if c.BrokerDowntime == 0 {
		c.BrokerDowntime = 2 * time.Second
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = 3 * time.Minute
	}
	if c.Seed == 0 {
		c.Seed = rand.Uint64()
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	c.Broker.setDefaults()
}

// delivery is the relays' delivery mode, as the CLI reads it.
func (c Config) delivery() string {
	if c.Delivery == "" {
		return "at_least_once"
	}
	return c.Delivery
}

// source is the relays' source, as the CLI reads it.
func (c Config) source() string {
	if c.Source == "" {
		return "polling"
	}
	return c.Source
}

// heartbeat is the relays' heartbeat interval: the CLI's default, LeaseTTL/4.
func (c Config) heartbeat() time.Duration { return c.LeaseTTL / 4 }

// TakeoverBound is the longest a stalled relay may keep its partitions: its lease runs out
// after at most LeaseTTL, the others notice within another LeaseTTL (their view of its
// liveness) and take the partitions at their next heartbeat. A relay stopped inside a lease
// transaction holds the lease rows until the database ends its idle transaction, after the
// forwarder's idle timeout (max(1 s, LeaseTTL/2)), and the others' heartbeats wait for it.
func (c Config) TakeoverBound() time.Duration {
	if c.LeaseTTL == 0 {
		c.setDefaults()
	}
	return 2*c.LeaseTTL + c.heartbeat() + max(time.Second, c.LeaseTTL/2)
}

// errMissing reports a Config without its required fields.
var errMissing = errors.New("faultinject: Config.DSN and Config.Broker.RepoRoot are required")

// validate checks the fields newEnv needs, after setDefaults.
func (c Config) validate() error {
	if c.DSN == "" || c.Broker.RepoRoot == "" {
		return errMissing
	}
	if c.Dialect != outbox.Postgres && c.Dialect != outbox.MySQL {
		return fmt.Errorf("faultinject: database %q: want %s or %s", c.Dialect, outbox.Postgres, outbox.MySQL)
	}
	if c.Installations > 1 && c.Dialect != outbox.Postgres {
		return fmt.Errorf("faultinject: Installations %d: several installations need PostgreSQL (a schema each)", c.Installations)
	}
	if c.Installations > 1 && strings.Contains(c.Table, ".") {
		return fmt.Errorf("faultinject: Table %q: with several installations the table is unqualified (each resolves it in its schema)", c.Table)
	}
	if err := c.validateScheduled(); err != nil {
		return err
	}
	if err := c.validateWAL(); err != nil {
		return err
	}
	return c.validateSchema()
}

// maxAttempts is the relays' forwarder.max_attempts.
func (c Config) maxAttempts() int {
	if c.MaxAttempts == 0 {
		return 1000
	}
	return c.MaxAttempts
}

// poisonBytes is the payload size of a poison event.
func (c Config) poisonBytes() int {
	switch {
	case c.PoisonBytes > 0:
		return c.PoisonBytes
	case c.Broker.Kind == Pulsar:
		return 8 << 20
	case c.Broker.Kind == RabbitMQ:
		return 20 << 20 // brokers/rabbitmq's default max_message_size is 16 MiB
	default:
		return 2 << 20
	}
}
