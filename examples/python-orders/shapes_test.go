package pythonorders_test

import (
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// outboxShape is the outbox table the Python service writes and how the relay gets to read it.
type outboxShape interface {
	// serviceArgs are service.py's arguments naming the table (and its shape).
	serviceArgs() []string
	// relayTable is the relay's database.table.
	relayTable() string
	// topic is where the relay sends the events.
	topic() string
	// prepare readies the relay's table once service.py created the business tables.
	prepare(t *testing.T, bin, dir string)
	// check runs once the consumer had every event.
	check(t *testing.T, db *sql.DB, w writeResult)
}

// outboxkitShape: outboxkit's own table, made by `outboxkit migrate`, emptied by the relay.
type outboxkitShape struct{ table, topicName string }

func (s outboxkitShape) serviceArgs() []string {
	return []string{"--outbox", s.table, "--topic", s.topicName}
}
func (s outboxkitShape) relayTable() string { return s.table }
func (s outboxkitShape) topic() string      { return s.topicName }

func (s outboxkitShape) prepare(t *testing.T, bin, dir string) {
	t.Helper()
	if out, err := runCLI(bin, dir, "migrate"); err != nil {
		t.Fatalf("outboxkit migrate: %v\n%s", err, out)
	}
}

func (s outboxkitShape) check(t *testing.T, db *sql.DB, _ writeResult) { waitEmpty(t, db, s.table) }

// seed004Shape: seed 004's outbox_events table, adopted by `outboxkit adopt` with the mapping of
// cmd/outboxkit/adopt.example.yaml; its rows end PUBLISHED.
type seed004Shape struct{ table, relay, topicPrefix string }

func (s seed004Shape) serviceArgs() []string {
	return []string{"--shape", "seed004", "--outbox", s.table}
}
func (s seed004Shape) relayTable() string { return s.relay }
func (s seed004Shape) topic() string      { return s.topicPrefix + ".order.events" }

func (s seed004Shape) prepare(t *testing.T, bin, dir string) {
	t.Helper()
	mapping := "table: " + s.table + `
topic_template: "` + s.topicPrefix + `.{aggregate_type|lower}.events"
columns:
  event_id: id
  aggregate_id: aggregate_id
  aggregate_type: aggregate_type
  event_type: event_type
  payload: payload
  headers: headers
  created_at: created_at
  status: status
  published_at: published_at
  retry_count: retry_count
  next_retry_at: next_retry_at
status: {pending: PENDING, published: PUBLISHED, failed: FAILED}
`
	if err := os.WriteFile(filepath.Join(dir, "adopt.yaml"), []byte(mapping), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runCLI(bin, dir, "adopt", "--config", "outboxkit.yaml", "--mapping", "adopt.yaml")
	if err != nil {
		t.Fatalf("outboxkit adopt: %v\n%s", err, out)
	}
	t.Logf("outboxkit adopt: %s", out)
}

// check waits (a minute at most) until every committed row is PUBLISHED with published_at
// set, and checks that the table holds no other row (a rolled-back INSERT leaves none).
func (s seed004Shape) check(t *testing.T, db *sql.DB, w writeResult) {
	t.Helper()
	q := `SELECT count(*) FILTER (WHERE status = 'PUBLISHED' AND published_at IS NOT NULL), count(*) FROM ` + s.table
	var published, all int
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if err := db.QueryRow(q).Scan(&published, &all); err != nil {
			t.Fatal(err)
		}
		if published == len(w.Committed) {
			break
		}
	}
	if published != len(w.Committed) || all != len(w.Committed) {
		t.Errorf("%s: %d rows PUBLISHED with published_at, %d rows in all; want both %d (the committed events)",
			s.table, published, all, len(w.Committed))
	}
}
