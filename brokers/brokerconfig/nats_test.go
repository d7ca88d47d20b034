package brokerconfig_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxkit/outboxkit/brokers/brokerconfig"
	"github.com/outboxkit/outboxkit/brokers/nats"
	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/internal/testsupport/forwardertest"
	"github.com/outboxkit/outboxkit/outbox"
)

func TestNATSConfigErrorsNameTheField(t *testing.T) {
	const base = "broker: nats\nnats:\n  urls: [nats://127.0.0.1:4222]\n"
	cases := []struct {
		name, yaml string
		env        map[string]string
		want       string
	}{
		{"nats.urls", "broker: nats\n", nil, "nats.urls: missing"},
		{"nats.urls scheme", "broker: nats\nnats:\n  urls: [http://h:1]\n", nil, `nats.urls: "http://h:1" has scheme "http"`},
		{"unknown nats key", base + "  stream: x\n", nil, "field stream not found"},
		{"nats.password", base + "  username: u\n", nil, "nats.username/password: set both or neither"},
		{"two auth methods", base + "  token: t\n  nkey_seed_file: /f\n", nil, "nats.username, token, nkey_seed_file, credentials_file: set one"},
		{"nats.partitions", base + "  partitions: 5000\n", nil, "nats.partitions: 5000 out of range 0..1024"},
		{"nats.replicas", base + "  replicas: 7\n", nil, "nats.replicas: 7 out of range 1..5"},
		{"nats.storage", base + "  storage: tape\n", nil, `nats.storage: unknown value "tape" (allowed: file, memory)`},
		{"nats.duplicate_window", base + "  duplicate_window: 10m\n  max_age: 1m\n", nil, "nats.duplicate_window: 10m0s longer than max_age 1m0s"},
		{"nats.consumer_group", base + "  consumer_group: 'a.b'\n", nil, `nats.consumer_group: "a.b" is not a valid`},
		{"nats.subscribers_count", base + "  subscribers_count: 3\n", nil, "nats.subscribers_count: 3 needs a consumer_group"},
		{"nats.tls.cert_file", base + "  tls: {cert_file: /c.pem}\n", nil, "nats.tls.cert_file/tls.key_file: set both or neither"},
		{"env bad partitions", base, map[string]string{"OUTBOXKIT_NATS_PARTITIONS": "many"}, `OUTBOXKIT_NATS_PARTITIONS (nats.partitions): "many" is not an integer`},
		{"env secret hidden", base + "  username: u\n", map[string]string{"OUTBOXKIT_NATS_PASSWORD": "", "OUTBOXKIT_NATS_REPLICAS": "0x"}, "OUTBOXKIT_NATS_REPLICAS"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := brokerconfig.Parse([]byte(tc.yaml), envMap(tc.env))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// The nats section from YAML and environment, with the defaults, and its secrets (password,
// token, a password in a URL) never printed.
func TestNATSConfigEnvDefaultsAndRedaction(t *testing.T) {
	const password, token = "nats-Secret-1", "nats-Token-22"
	cfg, err := brokerconfig.Parse([]byte("broker: nats\nnats:\n  urls: [nats://a:4222]\n  username: relay\n"), envMap(map[string]string{
		"OUTBOXKIT_NATS_URLS":     "nats://relay:" + password + "@h1:4222, nats://h2:4222",
		"OUTBOXKIT_NATS_PASSWORD": password, "OUTBOXKIT_NATS_PARTITIONS": "16", "OUTBOXKIT_NATS_DUPLICATE_WINDOW": "5m",
	}))
	if err != nil {
		t.Fatal(err)
	}
	n := cfg.NATS
	if len(n.URLs) != 2 || n.Partitions != 16 || n.DuplicateWindow != 5*time.Minute || n.Replicas != 1 ||
		n.Storage != "file" || n.KeyMetadata != "aggregate_id" || n.PublishTimeout != 30*time.Second {
		t.Fatalf("unexpected section: %+v", n)
	}
	tokenCfg, err := brokerconfig.Parse([]byte("broker: nats\nnats:\n  urls: [nats://a:4222]\n  token: "+token+"\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []brokerconfig.Config{cfg, tokenCfg} {
		var buf bytes.Buffer
		slog.New(slog.NewTextHandler(&buf, nil)).Info("loaded", "config", c)
		for name, out := range map[string]string{"String": c.String(), "%+v": fmt.Sprintf("%+v", c), "%#v": fmt.Sprintf("%#v", c),
			"nats %+v": fmt.Sprintf("%+v", c.NATS), "slog": buf.String()} {
			if strings.Contains(out, password) || strings.Contains(out, token) {
				t.Errorf("%s shows a secret: %s", name, out)
			}
		}
		if !strings.Contains(buf.String(), "REDACTED") {
			t.Errorf("slog output lacks the redaction mark: %s", buf.String())
		}
	}
}

// The publisher Build makes for broker nats is brokers/nats' Publisher, with the per-message
// outcomes and the error classifier the forwarder looks for.
func TestBuildNATSPublisherReportsOutcomes(t *testing.T) {
	url := testsupport.NATSURL(t)
	_, b := buildYAML(t, context.Background(), fmt.Sprintf("broker: nats\nnats:\n  urls: [%q]\n", url))
	if b.Broker() != "nats" {
		t.Errorf("Broker() = %q", b.Broker())
	}
	if _, ok := b.Publisher().(forwarder.OutcomePublisher); !ok {
		t.Fatalf("publisher %T has no PublishEach", b.Publisher())
	}
	if _, ok := b.Publisher().(forwarder.ErrorClassifier); !ok {
		t.Fatalf("publisher %T has no Retriable", b.Publisher())
	}
}

// Events written to a PostgreSQL outbox reach NATS through the forwarder and a publisher built
// from configuration (partitions 4): every event once, each key in commit order on its
// partition's subject, with Nats-Msg-Id = the event id; an event above the server's max_payload
// is dead-lettered at once (a permanent error) to the dead-letter topic's stream (reduced, since
// it is too large there too) while every other key flows, and the event after it on its key
// stays parked (pending) behind it.
func TestNATSRelayPerKeyOrderAndDeadLetter(t *testing.T) {
	url := testsupport.NATSURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cfg, b := buildYAML(t, ctx, fmt.Sprintf("broker: nats\nnats:\n  urls: [%q]\n  partitions: 4\n", url))

	topic := "relay." + testsupport.UniqueName("nats")
	dlq := "dlq." + testsupport.UniqueName("nats")
	_, _, poison := relayPoisonedKeys(t, ctx, b.Publisher(), topic, dlq)

	msgs := testsupport.ReadNATSStream(t, url, nats.StreamName(topic))
	if len(msgs) != relayKeys*relayPerKey {
		t.Fatalf("%d messages in the stream, want %d", len(msgs), relayKeys*relayPerKey)
	}
	next := map[string]int{}
	for _, m := range msgs {
		key := m.Header.Get("aggregate_id")
		if want := cfg.NATS.Subject(topic, key); m.Subject != want {
			t.Errorf("key %s on subject %s, want %s", key, m.Subject, want)
		}
		if m.Header.Get(jetstream.MsgIDHeader) != m.Header.Get(nats.UUIDHeader) || m.Header.Get(nats.UUIDHeader) != m.Header.Get("event_id") {
			t.Errorf("Nats-Msg-Id %q, UUID %q, event_id %q: want all equal", m.Header.Get(jetstream.MsgIDHeader),
				m.Header.Get(nats.UUIDHeader), m.Header.Get("event_id"))
		}
		if want := fmt.Sprintf(`{"seq":%d}`, next[key]); string(m.Data) != want {
			t.Fatalf("key %s: got %s, want %s (out of order)", key, m.Data, want)
		}
		next[key]++
	}
	deadLetters := testsupport.ReadNATSStream(t, url, nats.StreamName(dlq))
	if len(deadLetters) != 1 || deadLetters[0].Header.Get(nats.UUIDHeader) != poison.ID.String() {
		t.Fatalf("%d dead letters, want the poisoned event once", len(deadLetters))
	}
	t.Logf("dead letter reason: %q", deadLetters[0].Header.Get("reason_poisoned"))
}

// The keys and events per key relayPoisonedKeys writes.
const relayKeys, relayPerKey = 20, 10

// relayPoisonedKeys writes to a fresh PostgreSQL outbox relayPerKey events {"seq":n} of each of
// relayKeys keys on topic, then on the key "poisoned" an event above 1 MiB (poison) and one
// after it (parked), and relays them through pub, dead letters to dlq, until every other key is
// published and the poisoned event is dead; the parked event must still be pending behind it.
// It returns the database, the events table and the poisoned event.
func relayPoisonedKeys(t *testing.T, ctx context.Context, pub message.Publisher, topic, dlq string) (*sql.DB, string, outbox.Event) {
	t.Helper()
	var events []outbox.Event
	for seq := range relayPerKey {
		for k := range relayKeys {
			e, err := outbox.NewJSONEvent(topic, "order", "order-"+strconv.Itoa(k), "OrderUpdated", map[string]int{"seq": seq})
			if err != nil {
				t.Fatal(err)
			}
			e.ID = uuid.Must(uuid.NewV7())
			events = append(events, e)
		}
	}
	poison := outbox.Event{ID: uuid.Must(uuid.NewV7()), Topic: topic, AggregateType: "order", AggregateID: "poisoned",
		EventType: "Huge", Payload: bytes.Repeat([]byte("x"), 1100<<10)}
	parked := outbox.Event{ID: uuid.Must(uuid.NewV7()), Topic: topic, AggregateType: "order", AggregateID: "poisoned",
		EventType: "After", Payload: []byte("{}")}
	events = append(events, poison, parked)

	// Done when every other key is published and the poisoned event is dead.
	db, table := forwardertest.RelayPostgres(t, ctx, outbox.Config{Table: testsupport.UniqueName("nats_outbox"), MaxPayloadBytes: -1},
		pub, dlq, events,
		"SELECT COUNT(*) FILTER (WHERE status = 0 AND aggregate_id <> 'poisoned') + 1 - COUNT(*) FILTER (WHERE status = 2) FROM %s")
	var status int
	if err := db.QueryRowContext(ctx, "SELECT status FROM "+table+" WHERE event_id = $1", parked.ID).Scan(&status); err != nil || status != 0 {
		t.Fatalf("the event after the dead one: status %d (%v), want 0 (parked behind it)", status, err)
	}
	return db, table, poison
}
