package faultinject

import (
	"os"
	"strings"

	"gopkg.in/yaml.v3"
)

// relaySettings are what one relay start's configuration file says besides the run's Config.
type relaySettings struct {
	dsn         string // the database, with the relays' application_name
	table       string // database.table; "" leaves the CLI's default (outbox_events)
	dlq         string // forwarder.dead_letter_topic
	relayID     string // forwarder.relay_id
	checkpoints string // forwarder.checkpoint_topic (exactly-once delivery only)
	walSlot     string // forwarder.wal_slot (the wal source only)
}

// writeRelayConfig writes the YAML configuration of one `outboxkit relay` start to path.
func writeRelayConfig(path string, cfg Config, s relaySettings) error {
	db := map[string]any{"dialect": string(cfg.Dialect), "dsn": s.dsn}
	if s.table != "" {
		db["table"] = s.table
	}
	fwd := map[string]any{
		"batch_size": 250, "workers": 2, "max_attempts": cfg.maxAttempts(), "initial_interval": "100ms",
		"max_interval": "2s", "lease_ttl": cfg.LeaseTTL.String(), "dead_letter_topic": s.dlq,
		"max_poll_interval": "500ms", "relay_id": s.relayID,
	}
	doc := map[string]any{
		"database":  db,
		"forwarder": fwd,
		"http":      map[string]any{"listen": ""},
		"log":       map[string]any{"level": "warn"},
	}
	switch cfg.Broker.Kind {
	case Pulsar:
		doc["pulsar"] = map[string]any{"url": cfg.Broker.Addr()}
	case NATS:
		doc["nats"] = map[string]any{"urls": []string{cfg.Broker.Addr()}}
	case RabbitMQ:
		doc["rabbitmq"] = map[string]any{"url": cfg.Broker.Addr()}
	default:
		doc["kafka"] = map[string]any{"brokers": cfg.Broker.Addrs()}
	}
	doc["broker"] = cfg.Broker.cliBroker()
	if cfg.Schema != "" {
		doc["schema_registry"] = map[string]any{"url": cfg.RegistryURL}
	}
	if cfg.Source != "" {
		fwd["source"] = cfg.Source
	}
	if s.walSlot != "" {
		fwd["wal_slot"] = s.walSlot
	}
	if cfg.Delivery != "" {
		fwd["delivery"] = cfg.Delivery
		// The transactional-id prefix is left to its default: it is what installations share.
		fwd["checkpoint_topic"] = s.checkpoints
	}
	data, err := yaml.Marshal(doc)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

// withAppName adds application_name to a postgres:// URL or a key=value DSN.
func withAppName(dsn, app string) string {
	if strings.Contains(dsn, "://") {
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		return dsn + sep + "application_name=" + app
	}
	return dsn + " application_name=" + app
}
