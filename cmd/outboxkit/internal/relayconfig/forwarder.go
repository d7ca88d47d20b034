package relayconfig

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/outbox"
)

// Forwarder is the forwarder section. Zero values keep the forwarder's defaults (see
// forwarder.Config); Apply copies the set ones.
type Forwarder struct {
	// Source is polling (the default), cdc (PostgreSQL logical replication on the database
	// DSN; see docs/cdc.md) or wal (logical decoding messages on the database DSN; docs/wal.md).
	Source string
	// WALSlot is forwarder.WALConfig.Slot ("": the default, derived from the table).
	WALSlot string
	// Delivery is at_least_once (the default) or exactly_once (not with broker pulsar; see
	// docs/exactly-once.md).
	Delivery              string
	CheckpointTopic       string
	TransactionalIDPrefix string
	// TransactionalUnits is forwarder.Config.TransactionalUnits (0: the lease group's count, else
	// the default).
	TransactionalUnits int
	BatchSize          int
	MaxBatchBytes      int
	Workers            int
	MaxAttempts        int
	UnlimitedRetries   bool
	InitialInterval    time.Duration
	MaxInterval        time.Duration
	DeadLetterTopic    string
	Retention          time.Duration
	PruneInterval      time.Duration
	LeaseTTL           time.Duration
	PublishStallAfter  time.Duration
	Tenants            []string
	LeaseGroup         string
	RelayID            string
	MinPollInterval    time.Duration
	MaxPollInterval    time.Duration
}

// fields binds the section's keys.
func (f *Forwarder) fields() []field {
	return []field{
		{key: "batch_size", target: &f.BatchSize, positive: true},
		{key: "max_batch_bytes", target: &f.MaxBatchBytes, positive: true},
		{key: "unlimited_retries", target: &f.UnlimitedRetries},
		{key: "workers", target: &f.Workers, positive: true},
		{key: "max_attempts", target: &f.MaxAttempts, positive: true},
		{key: "initial_interval", target: &f.InitialInterval, positive: true},
		{key: "max_interval", target: &f.MaxInterval, positive: true},
		{key: "dead_letter_topic", target: &f.DeadLetterTopic},
		{key: "retention", target: &f.Retention},
		{key: "prune_interval", target: &f.PruneInterval, positive: true},
		{key: "lease_ttl", target: &f.LeaseTTL, positive: true},
		{key: "publish_stall_after", target: &f.PublishStallAfter, positive: true},
		{key: "tenants", target: &f.Tenants},
		{key: "lease_group", target: &f.LeaseGroup},
		{key: "relay_id", target: &f.RelayID},
		{key: "min_poll_interval", target: &f.MinPollInterval, positive: true},
		{key: "max_poll_interval", target: &f.MaxPollInterval, positive: true},
		{key: "delivery", target: &f.Delivery},
		{key: "source", target: &f.Source},
		{key: "wal_slot", target: &f.WALSlot},
		{key: "checkpoint_topic", target: &f.CheckpointTopic},
		{key: "transactional_id_prefix", target: &f.TransactionalIDPrefix},
		{key: "transactional_units", target: &f.TransactionalUnits, positive: true},
	}
}

// applyEnv applies the variables that override forwarder.delivery and forwarder.source.
func (f *Forwarder) applyEnv(lookup func(string) (string, bool)) {
	if lookup == nil {
		return
	}
	if v, ok := lookup(EnvForwarderDelivery); ok {
		f.Delivery = strings.TrimSpace(v)
	}
	if v, ok := lookup(EnvForwarderSource); ok {
		f.Source = strings.TrimSpace(v)
	}
}

// The forwarder's defaults (see forwarder.Config), used for the checks that relate two fields.
const (
	defaultMinPoll         = 10 * time.Millisecond
	defaultMaxPoll         = time.Second
	defaultInitialInterval = 500 * time.Millisecond
	defaultMaxInterval     = 5 * time.Minute
	defaultLeaseTTL        = 10 * time.Second
	maxBatchSize           = 4000
	maxIDLength            = 191
)

// validate checks the section's values, alone and against each other.
func (f *Forwarder) validate() error {
	switch forwarder.Source(f.Source) {
	case "", forwarder.SourcePolling, forwarder.SourceCDC, forwarder.SourceWAL:
	default:
		return fmt.Errorf("forwarder.source: unknown value %q (allowed: %s, %s, %s; or set %s)",
			f.Source, forwarder.SourcePolling, forwarder.SourceCDC, forwarder.SourceWAL, EnvForwarderSource)
	}
	switch forwarder.Delivery(f.Delivery) {
	case "", forwarder.AtLeastOnce, forwarder.ExactlyOnce:
	default:
		return fmt.Errorf("forwarder.delivery: unknown value %q (allowed: %s, %s; or set %s)",
			f.Delivery, forwarder.AtLeastOnce, forwarder.ExactlyOnce, EnvForwarderDelivery)
	}
	positiveInts := []struct {
		path  string
		value int
	}{
		{"forwarder.batch_size", f.BatchSize}, {"forwarder.max_batch_bytes", f.MaxBatchBytes},
		{"forwarder.workers", f.Workers}, {"forwarder.max_attempts", f.MaxAttempts},
		{"forwarder.transactional_units", f.TransactionalUnits},
	}
	for _, p := range positiveInts {
		if p.value < 0 {
			return fmt.Errorf("%s: must be positive, got %d", p.path, p.value)
		}
	}
	if f.BatchSize > maxBatchSize {
		return fmt.Errorf("forwarder.batch_size: must be at most %d, got %d", maxBatchSize, f.BatchSize)
	}
	if f.Workers > outbox.Partitions {
		return fmt.Errorf("forwarder.workers: must be at most %d (the number of partitions), got %d", outbox.Partitions, f.Workers)
	}
	durations := []struct {
		path  string
		value time.Duration
	}{
		{"forwarder.initial_interval", f.InitialInterval}, {"forwarder.max_interval", f.MaxInterval},
		{"forwarder.retention", f.Retention}, {"forwarder.prune_interval", f.PruneInterval},
		{"forwarder.lease_ttl", f.LeaseTTL}, {"forwarder.min_poll_interval", f.MinPollInterval},
		{"forwarder.max_poll_interval", f.MaxPollInterval},
	}
	for _, d := range durations {
		if d.value < 0 {
			return fmt.Errorf("%s: must not be negative, got %v", d.path, d.value)
		}
	}
	if f.LeaseTTL != 0 && f.LeaseTTL < time.Second {
		return fmt.Errorf("forwarder.lease_ttl: must be at least 1s, got %v", f.LeaseTTL)
	}
	minPoll, maxPoll := or(f.MinPollInterval, defaultMinPoll), or(f.MaxPollInterval, defaultMaxPoll)
	if maxPoll < minPoll {
		return fmt.Errorf("forwarder.max_poll_interval: %v is below forwarder.min_poll_interval %v", maxPoll, minPoll)
	}
	initial, maxB := or(f.InitialInterval, defaultInitialInterval), or(f.MaxInterval, defaultMaxInterval)
	if maxB < initial {
		return fmt.Errorf("forwarder.max_interval: %v is below forwarder.initial_interval %v", maxB, initial)
	}
	if len(f.LeaseGroup) > maxIDLength {
		return fmt.Errorf("forwarder.lease_group: must be at most %d bytes, got %d", maxIDLength, len(f.LeaseGroup))
	}
	if len(f.RelayID) > maxIDLength {
		return fmt.Errorf("forwarder.relay_id: must be at most %d bytes, got %d", maxIDLength, len(f.RelayID))
	}
	seen := map[string]bool{}
	for i, t := range f.Tenants {
		if seen[t] {
			return fmt.Errorf("forwarder.tenants[%d]: %q is listed twice", i, t)
		}
		seen[t] = true
	}
	return nil
}

func or(v, def time.Duration) time.Duration {
	if v == 0 {
		return def
	}
	return v
}

// Apply copies the set fields of the section into c, leaving the forwarder's defaults for the
// others.
func (f Forwarder) Apply(c *forwarder.Config) {
	c.Source = forwarder.Source(f.Source)
	c.WAL.Slot = f.WALSlot
	c.Delivery = forwarder.Delivery(f.Delivery)
	c.CheckpointTopic = f.CheckpointTopic
	c.TransactionalIDPrefix = f.TransactionalIDPrefix
	c.TransactionalUnits = f.TransactionalUnits
	c.BatchSize = f.BatchSize
	c.MaxBatchBytes = int64(f.MaxBatchBytes)
	c.UnlimitedRetries = f.UnlimitedRetries
	c.Workers = f.Workers
	c.MaxAttempts = f.MaxAttempts
	c.InitialInterval = f.InitialInterval
	c.MaxInterval = f.MaxInterval
	c.DeadLetterTopic = f.DeadLetterTopic
	c.Retention = f.Retention
	c.PruneInterval = f.PruneInterval
	c.LeaseTTL = f.LeaseTTL
	c.PublishStallAfter = f.PublishStallAfter
	c.Tenants = slices.Clone(f.Tenants)
	c.LeaseGroup = f.LeaseGroup
	c.RelayID = f.RelayID
	c.MinPollInterval = f.MinPollInterval
	c.MaxPollInterval = f.MaxPollInterval
}
