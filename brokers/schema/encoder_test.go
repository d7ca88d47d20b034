package schema

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/outboxkit/outboxkit/internal/testsupport"
)

const orderSchema = `{"type":"record","name":"Order","namespace":"outboxkit.test","fields":[
 {"name":"id","type":"string"},
 {"name":"amount","type":"long"},
 {"name":"qty","type":"int"},
 {"name":"price","type":"double"},
 {"name":"paid","type":"boolean"},
 {"name":"status","type":{"type":"enum","name":"Status","symbols":["NEW","SHIPPED"]}},
 {"name":"note","type":["null","string"],"default":null},
 {"name":"tags","type":{"type":"array","items":"string"},"default":[]},
 {"name":"items","type":{"type":"array","items":{"type":"record","name":"Item","fields":[
   {"name":"sku","type":"string"},{"name":"qty","type":"int"}]}}},
 {"name":"attrs","type":{"type":"map","values":"long"},"default":{}}
]}`

// countingTransport counts the requests that reach the registry.
type countingTransport struct{ n atomic.Int64 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

// registry returns a client of the test registry counting its requests, and registers
// orderSchema under a new topic's subject.
func registry(t testing.TB) (*sr.Client, *countingTransport, string, int) {
	t.Helper()
	base := testsupport.SchemaRegistryURL(t)
	counter := &countingTransport{}
	cl, err := sr.NewClient(sr.URLs(base), sr.HTTPClient(&http.Client{Transport: counter, Timeout: 10 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	topic := testsupport.UniqueName("orders")
	ss, err := cl.CreateSchema(context.Background(), Subject(topic), sr.Schema{Schema: orderSchema, Type: sr.TypeAvro})
	if err != nil {
		t.Fatalf("register: %v", err)
	}
	counter.n.Store(0)
	return cl, counter, topic, ss.ID
}

// TestEncodeReadsBackAsAConsumerWould encodes a JSON event and decodes it the way a registry
// consumer does: schema id from the Confluent header, schema fetched by id, Avro body decoded.
func TestEncodeReadsBackAsAConsumerWould(t *testing.T) {
	cl, _, topic, id := registry(t)
	enc, err := NewEncoder(cl, Config{})
	if err != nil {
		t.Fatal(err)
	}
	payload := `{"id":"o-1","amount":9007199254740993,"qty":3,"price":12.5,"paid":true,"status":"SHIPPED",
		"note":"fragile","items":[{"sku":"a","qty":1},{"sku":"b","qty":2}],"attrs":{"weight":7}}`
	out, err := enc.Encode(context.Background(), topic, []byte(payload))
	if err != nil {
		t.Fatalf("encode: %v", err)
	}

	var header sr.ConfluentHeader
	gotID, body, err := header.DecodeID(out)
	if err != nil || gotID != id {
		t.Fatalf("header: id %d, err %v; want id %d", gotID, err, id)
	}
	ss, err := cl.SchemaByID(context.Background(), gotID)
	if err != nil {
		t.Fatal(err)
	}
	var decoded map[string]any
	if err := avro.Unmarshal(avro.MustParse(ss.Schema), body, &decoded); err != nil {
		t.Fatalf("decode: %v", err)
	}
	checks := map[string]any{"id": "o-1", "amount": int64(9007199254740993), "qty": 3, "price": 12.5,
		"paid": true, "status": "SHIPPED"}
	for k, want := range checks {
		if decoded[k] != want {
			t.Errorf("%s = %#v (%T), want %#v (%T)", k, decoded[k], decoded[k], want, want)
		}
	}
	if decoded["note"] != "fragile" { // hamba/avro decodes a nullable union to the value itself
		t.Errorf("note = %#v, want fragile", decoded["note"])
	}
	if items, _ := decoded["items"].([]any); len(items) != 2 || items[1].(map[string]any)["sku"] != "b" {
		t.Errorf("items = %#v", decoded["items"])
	}
	if tags, _ := decoded["tags"].([]any); len(tags) != 0 {
		t.Errorf("tags = %#v, want the default []", decoded["tags"])
	}
	if attrs, _ := decoded["attrs"].(map[string]any); attrs["weight"] != int64(7) {
		t.Errorf("attrs = %#v", decoded["attrs"])
	}
}

// TestEncodeMismatchIsPermanentWithFieldPath: a payload that does not fit names where and why,
// and is not retriable.
func TestEncodeMismatchIsPermanentWithFieldPath(t *testing.T) {
	cl, _, topic, _ := registry(t)
	enc, err := NewEncoder(cl, Config{})
	if err != nil {
		t.Fatal(err)
	}
	base := `"id":"o","amount":1,"qty":1,"price":1,"paid":false,"status":"NEW"`
	checkMismatches(t, enc, topic, []mismatchCase{
		{`{` + base + `,"items":[{"sku":"a","qty":1},{"sku":"b","qty":"two"}]}`, "$.items[1].qty", "want an integer, got a string"},
		{`{"id":"o","amount":1,"qty":1,"price":1,"paid":false,"items":[]}`, "$.status", "required field is missing (it has no default)"},
		{`{` + base + `,"items":[],"colour":"red"}`, "$.colour", "field is not in record outboxkit.test.Order"},
		{`{"id":"o","amount":1,"qty":4294967296,"price":1,"paid":false,"status":"NEW","items":[]}`, "$.qty", "4294967296 is out of the range of an Avro int (32 bits)"},
		{`{"id":"o","amount":1,"qty":1,"price":1,"paid":false,"status":"LOST","items":[]}`, "$.status", `"LOST" is not a symbol of enum outboxkit.test.Status`},
		{`{` + base + `,"items":[],"note":5}`, "$.note", "want a string, got a number"},
		{`{"id":"o","amount":1.5,"qty":1,"price":1,"paid":false,"status":"NEW","items":[]}`, "$.amount", "1.5 is not a long (an integer in range)"},
		{`not json`, "$", "not JSON: invalid character 'o' in literal null (expecting 'u')"},
	})
}

// TestEncodeRegistryFailuresAreRetriable: a subject not registered and a registry that does not
// answer are retriable registry errors, not the event's fault.
func TestEncodeRegistryFailuresAreRetriable(t *testing.T) {
	cl, _, _, _ := registry(t)
	enc, err := NewEncoder(cl, Config{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = enc.Encode(context.Background(), testsupport.UniqueName("unregistered"), []byte(`{}`))
	var regErr *RegistryError
	if !errors.As(err, &regErr) || !Retriable(err) {
		t.Fatalf("unregistered subject: err %v, want a retriable *RegistryError", err)
	}

	down := unreachableRegistry(t)
	encDown, err := NewEncoder(down, Config{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = encDown.Encode(context.Background(), "orders", []byte(`{}`))
	if !errors.As(err, &regErr) || !Retriable(err) {
		t.Fatalf("registry down: err %v, want a retriable *RegistryError", err)
	}
}

// TestEncodeCachesLookups counts the requests that reach the registry: one per subject for a
// fixed version; for the latest, one more once LatestTTL has passed (a clock the test moves).
func TestEncodeCachesLookups(t *testing.T) {
	cl, counter, topic, _ := registry(t)
	payload := []byte(`{"id":"o","amount":1,"qty":1,"price":1,"paid":false,"status":"NEW","items":[]}`)

	fixed, err := NewEncoder(cl, Config{Version: 1})
	if err != nil {
		t.Fatal(err)
	}
	for range 1000 {
		if _, err := fixed.Encode(context.Background(), topic, payload); err != nil {
			t.Fatal(err)
		}
	}
	if n := counter.n.Load(); n != 1 {
		t.Fatalf("1000 events, version 1: %d registry requests, want 1", n)
	}

	counter.n.Store(0)
	latest, err := NewEncoder(cl, Config{LatestTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_000_000, 0)
	latest.now = func() time.Time { return now }
	for i := range 100 {
		if i == 50 {
			now = now.Add(time.Minute)
		}
		if _, err := latest.Encode(context.Background(), topic, payload); err != nil {
			t.Fatal(err)
		}
	}
	if n := counter.n.Load(); n != 2 {
		t.Fatalf("100 events, latest, the TTL passed once: %d registry requests, want 2", n)
	}
}

func TestConfigValidateNamesTheBadValue(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Version: -2}, "schema: version -2: want 0 (latest) or a version number from 1"},
		{Config{LatestTTL: -time.Second}, "schema: latest TTL -1s is negative"},
		{Config{Topics: map[string]TopicConfig{"orders": {Subject: "shop.Order", Strategy: StrategyRecord}}},
			`schema: topic "orders": subject "shop.Order" and subject_strategy "record": set one`},
		{Config{Topics: map[string]TopicConfig{"orders": {Version: -1}}}, `schema: topic "orders": version: -1: want 0 (latest) or a version number from 1`},
		{Config{Topics: map[string]TopicConfig{"orders": {Strategy: "name"}}}, `schema: topic "orders": subject strategy "name": want topic, record or topic_record`},
	} {
		if err := tc.cfg.Validate(); err == nil || err.Error() != tc.want {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
	}
}
