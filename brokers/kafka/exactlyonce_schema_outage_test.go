package kafka

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/outboxkit/outboxkit/brokers/schema"
	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// TestExactlyOnceThroughARegistryOutage: exactly-once delivery through brokers/schema's
// publisher on the real Kafka and the real registry, which the relay reaches through an HTTP
// proxy that answers 503 to everything while the registry is "down" (the latest version is
// cached for 1ms, so every batch asks the registry). Mid-run the registry goes down while
// events wait: the relay counts them as not tried (unavailable_total), spends no attempt on any
// of them and dead-letters none; once the registry answers again, a read_committed consumer
// reads every event exactly once, in key order: 0 lost, 0 duplicates.
func TestExactlyOnceThroughARegistryOutage(t *testing.T) {
	h := newEOHarness(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	registryURL := testsupport.SchemaRegistryURL(t)
	base, err := url.Parse(registryURL)
	if err != nil {
		t.Fatal(err)
	}
	var down atomic.Bool
	var refused atomic.Int64
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: base.Scheme, Host: base.Host})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			refused.Add(1)
			http.Error(w, `{"error_code":50301,"message":"registry down"}`, http.StatusServiceUnavailable)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	defer srv.Close()
	direct, err := sr.NewClient(sr.URLs(registryURL))
	if err != nil {
		t.Fatal(err)
	}
	ss, err := direct.CreateSchema(ctx, schema.Subject(h.topic), sr.Schema{Type: sr.TypeAvro,
		Schema: `{"type":"record","name":"Order","fields":[{"name":"key","type":"string"},{"name":"n","type":"long"}]}`})
	if err != nil {
		t.Fatal(err)
	}
	proxied, err := sr.NewClient(sr.URLs(srv.URL + base.Path))
	if err != nil {
		t.Fatal(err)
	}
	enc, err := schema.NewEncoder(proxied, schema.Config{LatestTTL: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	dec, err := schema.NewDecoder(direct)
	if err != nil {
		t.Fatal(err)
	}
	var header sr.ConfluentHeader
	h.decode = func(value []byte) []byte {
		if id, _, err := header.DecodeID(value); err != nil || id != ss.ID {
			t.Errorf("record value % x is not framed with schema id %d (%v)", value, ss.ID, err)
			return nil
		}
		out, err := dec.Decode(ctx, value)
		if err != nil {
			t.Errorf("decode: %v", err)
		}
		return out
	}
	h.publisherClassifies = true
	keys := eoKeys(6)
	h.write(keys, 0, 3)
	r := h.startRelay("eo-schema-outage", func(p *Publisher) forwarder.TransactionalPublisher {
		pub, err := schema.NewPublisher(p, enc)
		if err != nil {
			t.Fatal(err)
		}
		return pub.(forwarder.TransactionalPublisher)
	})
	h.waitDrained(2 * time.Minute)

	down.Store(true)
	h.write(keys, 3, 3)
	for r.counter("outboxkit_forwarder_unavailable_total") < float64(len(keys)*3) {
		if ctx.Err() != nil {
			t.Fatalf("the relay did not count the outage: unavailable_total %v, %d requests refused", r.counter("outboxkit_forwarder_unavailable_total"), refused.Load())
		}
		time.Sleep(50 * time.Millisecond)
	}
	var spent, dead int
	if err := h.db.QueryRowContext(ctx, "SELECT COUNT(*) FILTER (WHERE attempts > 0), COUNT(*) FILTER (WHERE status = 2) FROM "+
		h.writer.Table().Events()).Scan(&spent, &dead); err != nil {
		t.Fatal(err)
	}
	if spent != 0 || dead != 0 || h.pendingRows() != len(keys)*3 {
		t.Fatalf("during the outage: %d events with attempts spent, %d dead, %d pending; want 0, 0, %d", spent, dead, h.pendingRows(), len(keys)*3)
	}

	down.Store(false)
	h.waitDrained(2 * time.Minute)
	r.stop()
	if c := r.counter("outboxkit_forwarder_transactions_committed_total"); c == 0 {
		t.Fatal("no transaction committed: the relay did not run exactly-once delivery")
	}
	checkExactlyOnce(t, h.readAll(h.topic, true, len(keys)*6, 60*time.Second), keys, 6)
	h.decode = nil
	if dl := h.readAll(h.topic+"-dlq", true, 0, 5*time.Second); len(dl) != 0 {
		t.Fatalf("%d dead letters after a registry outage, want 0", len(dl))
	}
	t.Logf("%d registry requests refused during the outage", refused.Load())
}
