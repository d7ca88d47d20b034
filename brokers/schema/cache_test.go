package schema

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// pathCounter counts the registry requests per URL path.
type pathCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *pathCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.n[r.URL.Path]++
	c.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

// requests returns how many requests named s in their path.
func (c *pathCounter) requests(s string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	total := 0
	for p, n := range c.n {
		if strings.Contains(p, s) {
			total += n
		}
	}
	return total
}

// cacheFixture registers three Avro subjects (one per topic, different schemas) and returns a
// client counting requests per path, the topics and their schema ids.
func cacheFixture(t *testing.T) (*sr.Client, *pathCounter, []string, []int) {
	t.Helper()
	counter := &pathCounter{n: map[string]int{}}
	cl, err := sr.NewClient(sr.URLs(testsupport.SchemaRegistryURL(t)), sr.HTTPClient(&http.Client{Transport: counter, Timeout: 10 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	var topics []string
	var ids []int
	for i := range 3 {
		topic := testsupport.UniqueName(fmt.Sprintf("cache%d", i))
		text := fmt.Sprintf(`{"type":"record","name":"C%d","fields":[{"name":"n","type":"long"}]}`, i)
		topics = append(topics, topic)
		ids = append(ids, registerAs(t, cl, Subject(topic), sr.TypeAvro, text))
	}
	counter.mu.Lock()
	clear(counter.n)
	counter.mu.Unlock()
	return cl, counter, topics, ids
}

// The Encoder keeps at most CacheSize schemas; an evicted one is looked up again and encodes the
// same bytes; the least recently used goes first, so a subject used between every other is never
// evicted by them (no thrashing of the hot subject).
func TestEncoderCacheIsBoundedLeastRecentlyUsed(t *testing.T) {
	cl, counter, topics, _ := cacheFixture(t)
	ctx := context.Background()
	enc, err := NewEncoder(cl, Config{CacheSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	encode := func(i int) []byte {
		t.Helper()
		out, err := enc.Encode(ctx, topics[i], []byte(`{"n":7}`))
		if err != nil {
			t.Fatalf("%s: %v", topics[i], err)
		}
		return out
	}
	first := encode(0)
	encode(1)
	encode(2) // evicts topics[0]
	if n := enc.cache.Len(); n != 2 {
		t.Fatalf("cache holds %d schemas, want the bound 2", n)
	}
	if again := encode(0); !bytes.Equal(again, first) {
		t.Errorf("evicted subject encodes % x, first % x", again, first)
	}
	if n := counter.requests(topics[0]); n != 2 {
		t.Errorf("%d lookups of the evicted subject, want 2 (fetched again once)", n)
	}
	// topics[0] is used between every other: with 2 entries it stays, while 1 and 2 evict each other.
	for range 10 {
		encode(0)
		encode(1)
		encode(0)
		encode(2)
	}
	if n := counter.requests(topics[0]); n != 2 {
		t.Errorf("the hot subject was looked up %d times, want still 2", n)
	}
	if n := enc.cache.Len(); n != 2 {
		t.Errorf("cache holds %d schemas, want 2", n)
	}
}

// The Decoder keeps at most DecoderCacheSize schemas by id; an evicted id is fetched again and
// decodes the same JSON.
func TestDecoderCacheIsBoundedLeastRecentlyUsed(t *testing.T) {
	cl, counter, topics, ids := cacheFixture(t)
	ctx := context.Background()
	enc, err := NewEncoder(cl, Config{})
	if err != nil {
		t.Fatal(err)
	}
	dec, err := NewDecoder(cl, DecoderCacheSize(2))
	if err != nil {
		t.Fatal(err)
	}
	var framed [][]byte
	for i, topic := range topics {
		out, err := enc.Encode(ctx, topic, []byte(fmt.Sprintf(`{"n":%d}`, i)))
		if err != nil {
			t.Fatal(err)
		}
		framed = append(framed, out)
	}
	before := counter.requests("/schemas/ids/")
	decode := func(i int) string {
		t.Helper()
		out, err := dec.Decode(ctx, framed[i])
		if err != nil {
			t.Fatalf("decode %d: %v", i, err)
		}
		return string(out)
	}
	for i := range 3 {
		decode(i)
	}
	if n := dec.cache.Len(); n != 2 {
		t.Fatalf("decoder cache holds %d schemas, want the bound 2", n)
	}
	byID := fmt.Sprintf("/schemas/ids/%d", ids[0])
	if got := decode(0); got != `{"n":0}` {
		t.Errorf("evicted id decodes %s", got)
	}
	if before != 0 {
		t.Fatalf("%d fetches by id before decoding", before)
	}
	if n := counter.requests(byID); n != 2 {
		t.Errorf("%d fetches of evicted id %d, want 2", n, ids[0])
	}
	for range 10 {
		decode(0)
		decode(1)
		decode(0)
		decode(2)
	}
	if n := counter.requests(byID); n != 2 {
		t.Errorf("the hot id was fetched %d times, want still 2", n)
	}
}

// A bad cache size is refused, naming it.
func TestCacheSizeErrorsNameTheValue(t *testing.T) {
	if _, err := NewDecoder(&sr.Client{}, DecoderCacheSize(0)); err == nil || err.Error() != "schema: decoder cache size 0: want 1 or more" {
		t.Errorf("decoder: %v", err)
	}
	if err := (Config{CacheSize: -5}).Validate(); err == nil || err.Error() != "schema: cache size -5 is negative" {
		t.Errorf("encoder: %v", err)
	}
	if err := (RegistryConfig{URL: "http://r", CacheSize: -5}).Validate(); err == nil || err.Error() != "cache_size: -5 is negative" {
		t.Errorf("registry config: %v", err)
	}
}
