package main

import (
	"bytes"
	"context"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// TestOrdersKafka runs the service against the real PostgreSQL and Kafka with the folder's
// config.yaml, the broker address coming from the environment override, and checks that every
// order was shipped once, that the redelivered event was acknowledged as a duplicate, and that
// the database holds exactly one shipment per order.
func TestOrdersKafka(t *testing.T) {
	dsn := testsupport.PostgresDSN(t)
	brokers := testsupport.KafkaBrokers(t)
	env := map[string]string{"OUTBOXKIT_KAFKA_BROKERS": strings.Join(brokers, ",")}
	const orders = 4

	var out bytes.Buffer
	err := run(context.Background(), &out, options{
		Orders: orders, DSN: dsn, ConfigPath: "config.yaml", Unique: true, Timeout: 90 * time.Second,
		LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
	})
	got := out.String()
	t.Log("\n" + got)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	checkOutput(t, got, orders, "broker kafka ["+strings.Join(brokers, " ")+"]")
}

// checkOutput asserts the story of a run of `orders` orders.
func checkOutput(t *testing.T, got string, orders int, brokerLine string) {
	t.Helper()
	if !strings.Contains(got, brokerLine) {
		t.Fatalf("output does not name the broker as %q", brokerLine)
	}
	placed := regexp.MustCompile(`placed order (o-[0-9a-f]+-\d+) and its OrderPlaced event ([0-9a-f-]{36})`).FindAllStringSubmatch(got, -1)
	if len(placed) != orders {
		t.Fatalf("%d orders placed, want %d", len(placed), orders)
	}
	var counts []string
	for _, p := range placed {
		id, event := p[1], p[2]
		if n := strings.Count(got, "shipping: order "+id+" shipped (event "+event); n != 1 {
			t.Errorf("order %s: shipped %d times by its event %s, want 1", id, n, event)
		}
		counts = append(counts, id+"=1")
	}
	if n := strings.Count(got, " shipped (event "); n != orders {
		t.Errorf("%d shipments reported, want %d", n, orders)
	}
	redelivered := regexp.MustCompile(`redelivering event ([0-9a-f-]{36}) of order (o-[0-9a-f]+-1),`).FindStringSubmatch(got)
	if redelivered == nil {
		t.Fatal("no redelivery")
	}
	dup := "shipping: event " + redelivered[1] + " of order " + redelivered[2]
	// At least once: a natural redelivery may add to the one the program makes.
	if n := strings.Count(got, dup); n < 1 || !strings.Contains(got, "already processed: acknowledged, no second shipment") {
		t.Errorf("redelivered event reported %d times as a duplicate, want at least 1", n)
	}
	sort.Strings(counts)
	// The counts are read from the shipments table after the redelivery was acknowledged.
	if want := "shipments per order: " + strings.Join(counts, " ") + "\n"; !strings.Contains(got, want) {
		t.Errorf("output lacks %q", want)
	}
	stats := regexp.MustCompile(`inbox: (\d+) events processed, (\d+) duplicates ignored`).FindStringSubmatch(got)
	if stats == nil || stats[1] != strconv.Itoa(orders) || stats[2] == "0" {
		t.Errorf("inbox stats %q, want %d processed and at least 1 duplicate", stats, orders)
	}
}
