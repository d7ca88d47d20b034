package kafka

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"

	"github.com/twmb/franz-go/pkg/kgo"
)

// kgoOptions maps every publisher field of Config to franz-go: a client built from it reports
// the values back through OptValue.
func TestKgoOptions(t *testing.T) {
	c := Config{Brokers: []string{"127.0.0.1:1"}, ClientID: "relay-7", MessageMaxBytes: 2 << 20,
		ProducerRetries: 3, RetryBackoff: 42 * time.Millisecond, Compression: CompressionZstd}
	opts, err := c.kgoOptions(nil)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	checks := []struct {
		name      string
		got, want any
	}{
		{"seed brokers", cl.OptValue(kgo.SeedBrokers).([]string)[0], "127.0.0.1:1"},
		{"client id", cl.OptValue(kgo.ClientID), "relay-7"},
		{"idempotent", cl.OptValue(kgo.DisableIdempotentWrite), false},
		{"acks=all", cl.OptValue(kgo.RequiredAcks), kgo.AllISRAcks()},
		{"batch max bytes", cl.OptValue(kgo.ProducerBatchMaxBytes), int32(2 << 20)},
		{"record retries", cl.OptValue(kgo.RecordRetries), int64(3)},
		{"linger", cl.OptValue(kgo.ProducerLinger), time.Duration(0)},
		{"auto topic creation", cl.OptValue(kgo.AllowAutoTopicCreation), true},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s: got %v (%T), want %v (%T)", ch.name, ch.got, ch.got, ch.want, ch.want)
		}
	}
	if got := cl.OptValue(kgo.BrokerMaxWriteBytes).(int32); got < int32(c.MessageMaxBytes) {
		t.Errorf("broker max write bytes %d is below message_max_bytes %d: it would be the limit", got, c.MessageMaxBytes)
	}
	codecs := cl.OptValue(kgo.ProducerBatchCompression).([]kgo.CompressionCodec)
	if len(codecs) != 2 || codecs[0] != kgo.ZstdCompression() || codecs[1] != kgo.NoCompression() {
		t.Errorf("compression %v, want zstd then none", codecs)
	}
	backoff := cl.OptValue(kgo.RetryBackoffFn).(func(int) time.Duration)
	if backoff(1) != 42*time.Millisecond || backoff(9) != 42*time.Millisecond {
		t.Errorf("retry backoff %v, want a constant 42ms", backoff(1))
	}

	c.Compression = "brotli"
	if _, err := c.kgoOptions(nil); err == nil {
		t.Error("kgoOptions accepted an invalid config")
	}
}

// recordBatchSize never underestimates franz-go's own size of a one-record batch, so the
// publisher's check refuses every record that franz-go would refuse on its own.
func TestRecordBatchSize(t *testing.T) {
	r := &kgo.Record{Key: []byte("k"), Value: make([]byte, 300), Headers: []kgo.RecordHeader{{Key: "a", Value: []byte("b")}}}
	// franz-go: 65 bytes of batch overhead (recordBatchOverhead in sink.go); the record:
	// attributes 1, timestamp delta 1, offset delta 1, key 1+1, value 2+300, headers count 1,
	// header 1+1+1+1 = 312, its length prefix 2.
	want := 65 + 2 + 312
	if got := recordBatchSize(r); got < want || got > want+recordBatchSlack {
		t.Errorf("recordBatchSize = %d, want %d..%d", got, want, want+recordBatchSlack)
	}
	for _, v := range []int64{0, 1, -1, 63, 64, 8191, 8192, 1 << 40} {
		n := varintLen(v)
		if v == 63 && n != 1 || v == 64 && n != 2 || v == 8191 && n != 2 || v == 8192 && n != 3 {
			t.Errorf("varintLen(%d) = %d", v, n)
		}
	}
}

// TestKgoLoggerFields: franz-go's err becomes the logged error (never a null error), warnings
// say their level, and the component is named once.
func TestKgoLoggerFields(t *testing.T) {
	var buf bytes.Buffer
	l := kgoLogger{watermill.NewSlogLogger(slog.New(slog.NewJSONHandler(&buf, nil)))}
	l.Log(kgo.LogLevelError, "produce failed", "broker", 1, "err", errors.New("connection refused"))
	l.Log(kgo.LogLevelError, "no error value")
	l.Log(kgo.LogLevelWarn, "retrying", "err", errors.New("timeout"))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d log lines, want 3:\n%s", len(lines), buf.String())
	}
	for i, want := range []map[string]any{
		{"level": "ERROR", "error": "connection refused", "broker": float64(1), "component": "outboxkit.kafka.client"},
		{"level": "ERROR", "error": "no error value"},
		{"level": "INFO", "error": "timeout", "kafka_level": "warn"},
	} {
		var got map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &got); err != nil {
			t.Fatal(err)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("line %d: %s = %v, want %v (%s)", i, k, got[k], v, lines[i])
			}
		}
		if _, ok := got["err"]; ok || strings.Count(lines[i], `"component"`) > 1 {
			t.Errorf("line %d: a second error key or component: %s", i, lines[i])
		}
	}
}
