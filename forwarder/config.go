package forwarder

import (
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxkit/outboxkit/forwarder/internal/bookkeeping"
	"github.com/outboxkit/outboxkit/forwarder/internal/wal"
	"github.com/outboxkit/outboxkit/outbox"
)

// DefaultDeadLetterTopic is the topic dead-lettered events go to unless Config.DeadLetterTopic says
// otherwise.
const DefaultDeadLetterTopic = "outboxkit.dead_letters"

// Config configures a [Forwarder]. DB, Dialect and Publisher are required; every other field has
// a default, given in its comment.
type Config struct {
	// DB is the database holding the outbox table (for PostgreSQL, open it with pgx's stdlib driver).
	// The relay uses several of its connections at once (its workers, the heartbeat, the
	// statistics, the cdc source's retry path): keep more idle than database/sql's default of
	// two, e.g. DB.SetMaxIdleConns(16) as the CLI does, or the pool closes and opens connections
	// again all the time.
	DB *sql.DB
	// Dialect of DB.
	Dialect outbox.Dialect
	// Table is the outbox table. Default: outbox.DefaultTable.
	Table string
	// Publisher receives the events: any Watermill publisher, usually one built by brokers/kafka
	// or brokers/pulsar. A publisher that implements [OutcomePublisher] gets whole batches of a
	// topic in one PublishEach call; any other is called with one event per key per Publish call.
	Publisher message.Publisher

	// Delivery is AtLeastOnce (the default) or ExactlyOnce, which needs a Publisher that
	// implements [TransactionalPublisher] (brokers/kafka) and read_committed consumers
	// (docs/exactly-once.md).
	Delivery Delivery
	// CheckpointTopic receives the checkpoints of ExactlyOnce delivery, one per transaction; it
	// must be compacted (brokers/kafka creates it so when missing). Default:
	// DefaultCheckpointTopic. Only the relays may write it.
	CheckpointTopic string
	// TransactionalUnits is the number of transactional units of ExactlyOnce delivery: unit u
	// holds the partitions p with p % TransactionalUnits == u, is leased whole, and publishes its
	// batches in transactions of its own, with a producer (one connection per broker) of its
	// own. Fewer units make larger transactions; more units spread a group over more relays.
	// It must divide outbox.Partitions (64) and be a multiple of Workers. Default: the count the
	// lease group already runs with (its rows in the units table), else Workers (at least 2).
	// A count other than the group's is refused (ErrUnitCountMismatch; docs/exactly-once.md).
	TransactionalUnits int
	// TransactionalIDPrefix names the transactional units of ExactlyOnce delivery: unit
	// "<prefix>/uNN" (the Kafka transactional.id) for unit NN. It must be unique per outbox
	// table in a Kafka cluster: relays of two installations sharing a prefix would fence each
	// other, and each refuses the other's checkpoints (their events then wait, and the relays
	// log it as an error). Default: "outboxkit/<installation>/<table>/<lease group>", where
	// installation is the identity the migration made for the table (its
	// "<table>_installation" table), read when the forwarder starts.
	TransactionalIDPrefix string

	// Source is where events are read from: SourcePolling (default, every dialect), SourceCDC
	// (PostgreSQL logical replication, configured by CDC; docs/cdc.md) or SourceWAL (logical
	// decoding messages, configured by WAL; docs/wal.md).
	Source Source
	// CDC configures SourceCDC.
	CDC CDCConfig
	// WAL configures SourceWAL.
	WAL WALConfig
	// walHooks are the tests' hooks of the wal source (export_wal_test.go).
	walHooks *wal.Hooks

	// RelayID names this forwarder in the lease tables. Default: host name, process id and a
	// random suffix. Two running forwarders must never share one.
	RelayID string
	// LeaseGroup names the set of forwarders sharing the work. Default: "default", or
	// "tenants:<sorted tenant list>" when Tenants is set. Groups must cover disjoint tenants.
	LeaseGroup string
	// Tenants limits this forwarder to events of these tenant ids ("" is the tenant of events
	// without one). Default: every tenant.
	Tenants []string

	// BatchSize is the most rows claimed at once. Default: 1000. Larger batches amortize the
	// database round trips; smaller ones bound the duplicates a crash can cause. With
	// ExactlyOnce delivery it bounds each transactional unit's transaction instead: a polling
	// worker claims up to BatchSize rows for each unit it serves (MaxBatchBytes likewise).
	BatchSize int
	// MaxBatchBytes bounds the payload bytes claimed at once, beside BatchSize, so a batch of
	// large events stays small in memory (an event larger than this is claimed alone). Default:
	// 1 MiB, which keeps a relay with two workers under 64 MiB of RSS at 4 KiB payloads; 256-byte
	// events are not affected (1000 of them are 256 KiB). Raise it when memory is not tight:
	// larger batches drain large events faster (docs/benchmarks.md).
	MaxBatchBytes int64
	// Workers is the number of claim loops per forwarder, each serving its own share of the
	// leased partitions. Default: 2.
	Workers int
	// MinPollInterval is the wait after an empty poll while busy. Default: 10ms.
	MinPollInterval time.Duration
	// MaxPollInterval caps the idle backoff of polling (doubling from MinPollInterval). Default: 1s.
	MaxPollInterval time.Duration
	// Wakeups, when set, wakes idle workers at once (see [ListenPostgres]).
	Wakeups <-chan struct{}

	// MaxAttempts is how many times an event is tried before it is dead-lettered. Default: 10.
	MaxAttempts int
	// The retry backoff of a failed event, in Watermill's words (as middleware.Retry and
	// outboxkit's middleware.RetryConfig): InitialInterval × Multiplier^(attempts-1), capped at
	// MaxInterval, spread by ±RandomizationFactor.

	// InitialInterval is the wait after the first failure. Default: 500ms.
	InitialInterval time.Duration
	// MaxInterval caps the exponential backoff. Default: 5m.
	MaxInterval time.Duration
	// Multiplier grows the backoff per attempt, at least 1. Default: 2.
	Multiplier float64
	// RandomizationFactor spreads each wait over [wait×(1-f), wait×(1+f)], so that the retries of
	// many events do not arrive together; in [0, 1). Default: 0.2; set DisableJitter for exact waits.
	RandomizationFactor float64
	// DisableJitter makes the waits exact (RandomizationFactor 0).
	DisableJitter bool
	// UnlimitedRetries retries events that fail with a retriable error (see IsRetriable) without
	// limit, ignoring MaxAttempts: a broker outage then never fills the dead-letter topic nor
	// parks keys for good. Only permanent errors dead-letter. Default: false.
	UnlimitedRetries bool
	// DeadLetterTopic receives dead-lettered events with the reason in Watermill's poison-queue
	// headers. Default: "outboxkit.dead_letters".
	DeadLetterTopic string
	// IsRetriable classifies publish errors; a non-retriable error dead-letters the event at once,
	// a retriable one after MaxAttempts (unless UnlimitedRetries). Default: the Publisher's own
	// classifier when it has one (ErrorClassifier: brokers/kafka and brokers/pulsar do, and so do
	// the decorators of brokers/cloudevents), else every error is retriable.
	IsRetriable func(error) bool

	// Retention keeps published rows (status published) for this long before pruning them in
	// small batches. Default: 0, delete rows as soon as the broker acknowledged them.
	Retention time.Duration
	// PruneInterval is how often retained rows are pruned. Default: 1m.
	PruneInterval time.Duration

	// LeaseTTL is how long a partition lease lasts without renewal. Default: 10s.
	LeaseTTL time.Duration
	// HeartbeatInterval is how often leases are renewed and rebalanced. Default: LeaseTTL/4.
	// While partitions move between relays, the relays giving and taking them step every
	// HeartbeatInterval/25 (at least MinPollInterval) until the move is done.
	HeartbeatInterval time.Duration
	// StatsInterval is how often the pending-rows gauges are refreshed. Default: 10s.
	StatsInterval time.Duration
	// PublishStallAfter is how long every delivery may fail, or one may go without returning (the
	// broker unreachable, or refusing everything), before the forwarder says so: a warning, outboxkit_forwarder_publish_stalled
	// set to 1, and an info line when publishing recovers. Default: 1m.
	PublishStallAfter time.Duration

	// Metrics, when set, receives the forwarder's Prometheus metrics.
	Metrics prometheus.Registerer
	// TracerProvider, when set, gives every published event an OpenTelemetry producer span, a
	// child of the span that wrote it (its stored traceparent), and sends that span's context
	// with the message (docs/observability.md). Default nil: no spans, and the publisher is
	// used unwrapped. otel's global provider is never read.
	TracerProvider trace.TracerProvider
	// MessagingSystem is the messaging.system attribute of the producer spans, such as "kafka"
	// or "pulsar" ("kafka" adds messaging.kafka.message.key). Default "": left out.
	MessagingSystem string
	// Logger receives the forwarder's logs. Default: slog.Default().
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.Table == "" {
		c.Table = outbox.DefaultTable
	}
	if c.RelayID == "" {
		host, _ := os.Hostname()
		c.RelayID = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), uuid.NewString()[:8])
	}
	if c.LeaseGroup == "" {
		c.LeaseGroup = DefaultLeaseGroup(c.Tenants)
	}
	setDefault(&c.Delivery, AtLeastOnce)
	setDefault(&c.CheckpointTopic, DefaultCheckpointTopic)
	setDefault(&c.BatchSize, 1000)
	setDefault(&c.MaxBatchBytes, 1<<20)
	setDefault(&c.Workers, 2)
	setDefault(&c.TransactionalUnits, bookkeeping.DefaultUnits(c.Workers))
	setDefault(&c.MinPollInterval, 10*time.Millisecond)
	setDefault(&c.MaxPollInterval, time.Second)
	setDefault(&c.MaxAttempts, 10)
	setDefault(&c.InitialInterval, 500*time.Millisecond)
	setDefault(&c.MaxInterval, 5*time.Minute)
	setDefault(&c.Multiplier, 2)
	if c.DisableJitter {
		c.RandomizationFactor = 0
	} else {
		setDefault(&c.RandomizationFactor, 0.2)
	}
	setDefault(&c.DeadLetterTopic, DefaultDeadLetterTopic)
	setDefault(&c.PruneInterval, time.Minute)
	setDefault(&c.LeaseTTL, 10*time.Second)
	setDefault(&c.HeartbeatInterval, c.LeaseTTL/4)
	setDefault(&c.StatsInterval, 10*time.Second)
	setDefault(&c.PublishStallAfter, time.Minute)
	c.setCDCDefaults()
	if c.IsRetriable == nil {
		c.IsRetriable = defaultClassifier(c.Publisher)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	// Wrapped here, once, so that every publish call of every path (batches, isolation,
	// dead letters) is traced; a nil TracerProvider leaves the publisher as it is.
	c.Publisher = tracePublisher(c.Publisher, c.TracerProvider, c.MessagingSystem, c.DeadLetterTopic)
}

// DefaultLeaseGroup is Config.LeaseGroup's default for forwarders of the given tenants:
// "default", or "tenants:<sorted tenant list>".
func DefaultLeaseGroup(tenants []string) string { return bookkeeping.DefaultLeaseGroup(tenants) }

func setDefault[T comparable](field *T, value T) {
	var zero T
	if *field == zero {
		*field = value
	}
}

// Validate checks the configuration; errors name the bad field and value.
func (c Config) Validate() error {
	var errs []error
	if c.DB == nil {
		errs = append(errs, errors.New("DB is required"))
	}
	if c.Publisher == nil {
		errs = append(errs, errors.New("Publisher is required"))
	}
	if c.Dialect == "" {
		errs = append(errs, errors.New("Dialect is required (postgres, mysql or sqlite)"))
	} else if _, err := outbox.NewTable(c.Dialect, c.Table); err != nil {
		errs = append(errs, err)
	}
	positive := []struct {
		name  string
		value float64
	}{
		{"BatchSize", float64(c.BatchSize)}, {"MaxBatchBytes", float64(c.MaxBatchBytes)}, {"Workers", float64(c.Workers)},
		{"MinPollInterval", float64(c.MinPollInterval)}, {"MaxPollInterval", float64(c.MaxPollInterval)},
		{"MaxAttempts", float64(c.MaxAttempts)}, {"InitialInterval", float64(c.InitialInterval)},
		{"MaxInterval", float64(c.MaxInterval)}, {"LeaseTTL", float64(c.LeaseTTL)},
		{"HeartbeatInterval", float64(c.HeartbeatInterval)}, {"StatsInterval", float64(c.StatsInterval)},
		{"PruneInterval", float64(c.PruneInterval)}, {"PublishStallAfter", float64(c.PublishStallAfter)},
	}
	for _, p := range positive {
		if p.value <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %v", p.name, p.value))
		}
	}
	if c.BatchSize > 4000 {
		errs = append(errs, fmt.Errorf("BatchSize %d is above the limit of 4000", c.BatchSize))
	}
	if c.Workers > outbox.Partitions {
		errs = append(errs, fmt.Errorf("Workers %d is above the %d partitions", c.Workers, outbox.Partitions))
	}
	if c.MaxPollInterval < c.MinPollInterval {
		errs = append(errs, fmt.Errorf("MaxPollInterval %v is below MinPollInterval %v", c.MaxPollInterval, c.MinPollInterval))
	}
	if c.Multiplier < 1 {
		errs = append(errs, fmt.Errorf("Multiplier %v must be at least 1", c.Multiplier))
	}
	if c.RandomizationFactor < 0 || c.RandomizationFactor >= 1 {
		errs = append(errs, fmt.Errorf("RandomizationFactor %v must be in [0, 1)", c.RandomizationFactor))
	}
	if c.HeartbeatInterval >= c.LeaseTTL {
		errs = append(errs, fmt.Errorf("HeartbeatInterval %v must be shorter than LeaseTTL %v", c.HeartbeatInterval, c.LeaseTTL))
	}
	if err := outbox.ValidateTopic(c.DeadLetterTopic); err != nil {
		errs = append(errs, fmt.Errorf("DeadLetterTopic: %w", err))
	}
	if c.Retention < 0 {
		errs = append(errs, fmt.Errorf("Retention %v must not be negative", c.Retention))
	}
	if len(c.RelayID) > 191 || len(c.LeaseGroup) > 191 {
		errs = append(errs, errors.New("RelayID and LeaseGroup must be at most 191 bytes"))
	}
	errs = append(errs, c.validateDelivery()...)
	errs = append(errs, c.validateSource()...)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("forwarder: invalid config: %w", err)
	}
	return nil
}
