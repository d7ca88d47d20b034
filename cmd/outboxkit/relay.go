package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/outboxkit/outboxkit/brokers/brokerconfig"
	"github.com/outboxkit/outboxkit/cmd/outboxkit/internal/relayconfig"
	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/outbox"
)

// migrateAttempts bounds how often relay --migrate pings a database that is not up yet.
const migrateAttempts = 5

func (a *app) relayCommand() *cobra.Command {
	var runMigrate bool
	cmd := &cobra.Command{
		Use:   "relay",
		Short: "Run the relay: forward committed outbox events to the configured broker until stopped",
		Long: `relay runs outboxkit's forwarder on the configured outbox table: it claims committed events in
batches, publishes them to the broker of the configuration (broker: kafka or pulsar, not kfake) and
removes each row only after the broker acknowledged it, with retries, dead-lettering and per-key
order. Several relays may run against one table; they share the work through leases.

On PostgreSQL it LISTENs for new events and relays them within milliseconds; on other databases
it polls (forwarder.min_poll_interval .. forwarder.max_poll_interval).

Unless http.listen is "", it serves on that address (default 127.0.0.1:9464):
  /metrics   Prometheus metrics (outboxkit_forwarder_*, Go and process metrics)
  /livez     200 while the process serves (a liveness probe: never looks at a dependency)
  /readyz    200 while the relay runs and the database answers a ping, 503 otherwise
  /healthz   the same as /readyz (kept for existing probes)
  /api/v1/   the admin API (JSON) and /console/ the web console, only when admin tokens are
             configured (http.admin_read_tokens_file, http.admin_write_tokens_file,
             OUTBOXKIT_ADMIN_*_TOKENS); off (404) otherwise. With http.admin_listen they move
             to a listener of their own (TLS with http.admin_tls_cert_file and
             http.admin_tls_key_file, client certificates with http.admin_client_ca_file).
             See docs/admin-api.md and docs/security.md.

SIGTERM or SIGINT stops it cleanly: in-flight batches finish, leases are released, and the
process exits with code 0. A second signal kills it at once. If the database cannot be reached
at start (after a few retries, each logged), it exits with code 1.`,
		Example: `  outboxkit relay --config outboxkit.yaml
  outboxkit relay --config outboxkit.yaml --migrate
  OUTBOXKIT_DATABASE_DSN=postgres://... OUTBOXKIT_KAFKA_BROKERS=kafka:9092 outboxkit relay -c outboxkit.yaml`,
		Args: cobra.NoArgs,
		RunE: a.runE(func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.loadConfig(true)
			if err != nil {
				return err
			}
			if err := relayconfig.CheckRelay(cfg, os.LookupEnv); err != nil {
				return usageErr(fmt.Errorf("config %s: %w", a.configPath, err))
			}
			return a.relay(cmd.Context(), cfg, runMigrate)
		}),
	}
	cmd.Flags().BoolVar(&runMigrate, "migrate", false,
		"create or upgrade the outbox schema before relaying (as the migrate command does; waits for the database a few times first)")
	return cmd
}

// relay runs the relay until parent ends or a signal stops it: the HTTP endpoints first, then
// the optional migration, the broker, tracing and the forwarder.
func (a *app) relay(parent context.Context, cfg relayconfig.Config, runMigrate bool) error {
	logger := a.newLogger(cfg.Log, a.stderr)
	logRelayStart(logger, cfg)
	ctx, cleanup := signalContext(parent, logger)
	defer cleanup()

	table, err := outbox.NewTable(cfg.Database.Dialect, cfg.Database.Table)
	if err != nil {
		return usageErr(fmt.Errorf("database.table: %w", err))
	}
	db, err := openDB(cfg.Database)
	if err != nil {
		return err
	}
	defer db.Close()

	// The listener opens first: a taken port fails the relay at once, and /livez answers while
	// the relay waits for its database and broker (/readyz says 503 until it runs).
	registry := newRegistry()
	var (
		running   atomic.Bool
		publisher atomic.Pointer[message.Publisher] // set once the broker is connected
	)
	stopHTTP, err := startRelayHTTP(cfg, db, registry, &running, &publisher, logger)
	if err != nil {
		return err
	}
	defer stopHTTP()

	if runMigrate {
		if err := migrate(ctx, db, cfg.Database, table, logger, migrateAttempts); err != nil {
			return err
		}
	}
	brokers, err := connectBroker(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer closeBroker(brokers, logger)
	pub := brokers.Publisher()
	publisher.Store(&pub)

	tp, stopTracing, err := startRelayTracing(ctx, logger)
	if err != nil {
		return err
	}
	defer stopTracing()
	fwd, err := newRelayForwarder(ctx, cfg, db, table, pub, registry, logger, tp)
	if err != nil {
		return err
	}
	running.Store(true)
	runErr := fwd.Run(ctx)
	running.Store(false)
	return relayStopped(ctx, parent, runErr, logger)
}

// logRelayStart logs the start-up line (the configuration, secrets redacted, and the names,
// never the values, of the environment variables that override the file), the warnings about
// unsafe settings, and one warning per set OUTBOXKIT_* variable the relay does not read, with
// the nearest one it reads (a typo would otherwise leave a default in effect without a word).
func logRelayStart(logger *slog.Logger, cfg relayconfig.Config) {
	logger.Info("outboxkit relay starting", "config", cfg,
		"env_overrides", relayconfig.AppliedEnv(os.LookupEnv, relayconfig.Options{Broker: true}))
	for _, w := range cfg.Warnings() {
		logger.Warn(w)
	}
	for _, u := range relayconfig.UnknownEnv(os.Environ()) {
		logger.Warn("unknown OUTBOXKIT_* environment variable, ignored", "variable", u.Name, "did_you_mean", u.Nearest)
	}
}

// closeBroker closes the broker's clients, logging a failure.
func closeBroker(brokers *brokerconfig.Brokers, logger *slog.Logger) {
	if err := brokers.Close(); err != nil {
		logger.Warn("closing the broker client", "error", err)
	}
}

// startRelayTracing returns the relay's tracer provider (nil without tracing; see relayTracing)
// and a function that flushes its last spans.
func startRelayTracing(ctx context.Context, logger *slog.Logger) (*sdktrace.TracerProvider, func(), error) {
	tp, err := relayTracing(ctx, os.LookupEnv)
	if err != nil {
		return nil, nil, err
	}
	if tp == nil {
		return nil, func() {}, nil
	}
	logger.Info("tracing: OTLP/HTTP exporter from the OTEL_EXPORTER_OTLP_* variables")
	return tp, func() {
		// Flush the last spans; a stopped relay waits for the collector a few seconds at most.
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tp.Shutdown(sctx); err != nil {
			logger.Warn("tracing: flushing the last spans failed", "error", err)
		}
	}, nil
}

// relayStopped returns the relay's result from the forwarder's, runErr: ctx is the signal
// context made from parent.
func relayStopped(ctx, parent context.Context, runErr error, logger *slog.Logger) error {
	stoppedBySettings := errors.Is(runErr, forwarder.ErrUnitCountMismatch) // whether or not a signal came too
	if runErr != nil && ctx.Err() != nil && parent.Err() == nil && !stoppedBySettings {
		// A signal arrived while the forwarder was still waiting for the database: the
		// operator asked for the stop, so it is not a failure.
		logger.Info("outboxkit relay stopped before the forwarder started", "error", runErr)
		return nil
	}
	if runErr != nil {
		return fmt.Errorf("relay: %w", runErr)
	}
	logger.Info("outboxkit relay stopped")
	return nil
}

// newRegistry is the relay's Prometheus registry, with the Go runtime and process collectors and
// go_build_info{path, version, checksum}.
func newRegistry() *prometheus.Registry {
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewBuildInfoCollector())
	return registry
}

// signalContext is parent cancelled by SIGTERM or SIGINT (logged); a second signal kills the
// process at once. cleanup releases the signal handler.
func signalContext(parent context.Context, logger *slog.Logger) (context.Context, func()) {
	ctx, stop := signal.NotifyContext(parent, syscall.SIGTERM, syscall.SIGINT)
	finished := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			// Restore the default behaviour: a second signal kills the process at once.
			stop()
			if parent.Err() == nil {
				logger.Info("signal received, stopping: finishing in-flight batches and releasing leases")
			}
		case <-finished:
		}
	}()
	return ctx, func() {
		close(finished) // before stop: the goroutine above ends without logging
		stop()
	}
}

// connectBroker builds the configured broker's clients and, for Pulsar (which connects lazily),
// opens the dead-letter topic's producer, so that an unreachable broker or refused credentials
// stop the relay at start with a clear error. On NATS the dead-letter topic is one subject
// whatever nats.partitions (nats.Config.DeadLetterTopics), so that installations with other
// partitions can share it.
func connectBroker(ctx context.Context, cfg relayconfig.Config, logger *slog.Logger) (*brokerconfig.Brokers, error) {
	dlq := cfg.Forwarder.DeadLetterTopic
	if dlq == "" {
		dlq = forwarder.DefaultDeadLetterTopic
	}
	bcfg := cfg.Broker
	bcfg.NATS.DeadLetterTopics = append(slices.Clone(bcfg.NATS.DeadLetterTopics), dlq)
	brokers, err := brokerconfig.Build(ctx, bcfg, watermill.NewSlogLogger(logger.With("broker", cfg.Broker.Broker)))
	if err != nil {
		return nil, fmt.Errorf("relay: %w", err)
	}
	if connector, ok := brokers.Publisher().(interface{ Connect(topic string) error }); ok {
		if err := connector.Connect(dlq); err != nil {
			_ = brokers.Close()
			return nil, fmt.Errorf("relay: broker %s: %w", brokers.Broker(), err)
		}
	}
	logger.Info("broker ready", "broker", brokers.Broker(), "addrs", brokers.Addrs())
	return brokers, nil
}

// newRelayForwarder configures the forwarder of the relay.
func newRelayForwarder(ctx context.Context, cfg relayconfig.Config, db *sql.DB, table outbox.Table, pub message.Publisher,
	registry *prometheus.Registry, logger *slog.Logger, tp *sdktrace.TracerProvider) (*forwarder.Forwarder, error) {
	fcfg := forwarder.Config{
		DB:        db,
		Dialect:   cfg.Database.Dialect,
		Table:     cfg.Database.Table,
		Publisher: pub,
		Metrics:   registry,
		Logger:    logger,
		// messaging.system of the producer spans: the broker's name (kafka, pulsar, nats, rabbitmq).
		MessagingSystem: cfg.Broker.Broker,
	}
	if tp != nil { // a nil *TracerProvider would be a non-nil interface
		fcfg.TracerProvider = tp
	}
	cfg.Forwarder.Apply(&fcfg)
	// IsRetriable stays unset: the broker's publisher classifies its own errors.
	switch {
	case fcfg.Source == forwarder.SourceCDC:
		fcfg.CDC.DSN = cfg.Database.DSN // the stream wakes the relay: no LISTEN
	case fcfg.Source == forwarder.SourceWAL:
		fcfg.WAL.DSN = cfg.Database.DSN
	case cfg.Database.Dialect == outbox.Postgres:
		fcfg.Wakeups = forwarder.ListenPostgres(ctx, cfg.Database.DSN, table, logger)
	}
	fwd, err := forwarder.New(fcfg)
	if err != nil {
		return nil, usageErr(err)
	}
	return fwd, nil
}
