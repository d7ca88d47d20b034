package outbox_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outboxkit/outboxkit/brokers/kafka"
	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// TestSQLWrittenEventsAreRelayed: events of one key written alternately by plain SQL and by
// outbox.Writer reach the real Kafka in commit order, with the aggregate id as the key and the
// same metadata headers whichever writer wrote them.
func TestSQLWrittenEventsAreRelayed(t *testing.T) {
	brokers := testsupport.KafkaBrokers(t)
	for _, d := range sqlDialects {
		t.Run(string(d), func(t *testing.T) {
			tg := newSQLTarget(t, d)
			ctx := context.Background()
			topic := testsupport.UniqueName("anywriter")
			testsupport.CreateKafkaTopic(t, brokers, topic)
			const events = 6
			wantIDs := make([]string, events)
			for n := range events {
				if n%2 == 0 {
					e := newSQLEvent("acme", "order", "o-日本-1", n)
					e.topic = topic
					if err := tg.insertSQL(ctx, tg.db, e); err != nil {
						t.Fatalf("plain INSERT: %v", err)
					}
					wantIDs[n] = e.id
					continue
				}
				e, err := outbox.NewJSONEvent(topic, "order", "o-日本-1", "OrderChanged", map[string]any{"key": "o-日本-1", "n": n})
				if err != nil {
					t.Fatal(err)
				}
				e.TenantID, e.ID = "acme", uuid.Must(uuid.NewV7())
				if err := tg.placeOrder(ctx, "b-"+string(rune('a'+n)), true, e); err != nil {
					t.Fatal(err)
				}
				wantIDs[n] = e.ID.String()
			}
			pub, err := kafka.NewPublisher(kafka.Config{Brokers: brokers}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer pub.Close()
			f, err := forwarder.New(forwarder.Config{DB: tg.db, Dialect: d, Table: tg.writer.Table().Events(), Publisher: pub,
				LeaseTTL: 2 * time.Second, HeartbeatInterval: 200 * time.Millisecond, MaxPollInterval: 200 * time.Millisecond,
				Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
			if err != nil {
				t.Fatal(err)
			}
			runCtx, stop := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- f.Run(runCtx) }()
			got := consumeRecords(t, brokers, topic, events, 60*time.Second)
			stop()
			if err := <-done; err != nil {
				t.Errorf("forwarder.Run: %v", err)
			}
			if len(got) != events {
				t.Fatalf("%d records arrived, want %d", len(got), events)
			}
			for n, r := range got {
				h := map[string]string{}
				for _, hd := range r.Headers {
					h[hd.Key] = string(hd.Value)
				}
				var body struct{ N int }
				if err := json.Unmarshal(r.Value, &body); err != nil || body.N != n {
					t.Errorf("record %d: payload %s, want n=%d (commit order)", n, r.Value, n)
				}
				if string(r.Key) != "o-日本-1" || h[outbox.MetadataEventID] != wantIDs[n] || h[outbox.MetadataTenantID] != "acme" ||
					h[outbox.MetadataAggregateType] != "order" || h[outbox.MetadataEventType] != "OrderChanged" ||
					h["content-type"] != "application/json" || h[outbox.MetadataCreatedAt] == "" {
					t.Errorf("record %d: key %q headers %v, want the same metadata from either writer", n, r.Key, h)
				}
			}
		})
	}
}

// consumeRecords reads topic from the start until want records arrived or the timeout passed.
func consumeRecords(t *testing.T, brokers []string, topic string, want int, timeout time.Duration) []*kgo.Record {
	t.Helper()
	client, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out []*kgo.Record
	for len(out) < want && ctx.Err() == nil {
		client.PollFetches(ctx).EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	return out
}
