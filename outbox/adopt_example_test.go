package outbox_test

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/outboxkit/outboxkit/outbox"
)

// seed004Mapping maps the outbox_events table of seed 004 (docs/adopting.md).
var seed004Mapping = outbox.AdoptConfig{
	Table:         "outbox_events",
	TopicTemplate: "{aggregate_type|lower}.events",
	Columns: outbox.AdoptColumns{EventID: "id", AggregateID: "aggregate_id", AggregateType: "aggregate_type",
		EventType: "event_type", Payload: "payload", Headers: "headers", CreatedAt: "created_at",
		Status: "status", PublishedAt: "published_at", RetryCount: "retry_count", NextRetryAt: "next_retry_at"},
	Status: outbox.AdoptStatus{Pending: "PENDING", Published: "PUBLISHED", Failed: "FAILED"},
}

// Adopt a team's outbox table: its writers keep inserting into outbox_events; the relay reads
// outbox_events_relay (forwarder.Config.Table), and marks their rows PUBLISHED or FAILED.
func ExampleAdopt() {
	db, err := sql.Open("pgx", "postgres://app@localhost/app")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	relay, err := outbox.NewTable(outbox.Postgres, "outbox_events_relay")
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := outbox.Adopt(context.Background(), db, relay, seed004Mapping)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("triggers changed: %v, pending rows copied: %d\n", res.Changed, res.Backfilled)
}

// Adopt a MariaDB/MySQL team's table: the same mapping, a relay table of the MySQL dialect. The
// triggers are installed under LOCK TABLES, which the team's writers wait for.
func ExampleAdopt_mariaDB() {
	db, err := sql.Open("mysql", "app:secret@tcp(localhost:3306)/app")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	relay, err := outbox.NewTable(outbox.MySQL, "outbox_events_relay")
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := outbox.Adopt(context.Background(), db, relay, seed004Mapping)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("triggers changed: %v, pending rows copied: %d\n", res.Changed, res.Backfilled)
}

// A mapping is checked before anything runs; errors name the configuration key.
func ExampleAdoptConfig_Validate() {
	cfg := seed004Mapping
	cfg.Columns.EventID = ""
	fmt.Println(cfg.Validate())
	cfg = seed004Mapping
	cfg.TopicTemplate = "{aggregate_type} events"
	fmt.Println(cfg.Validate())
	// Output:
	// invalid adopt configuration: columns.event_id is required
	// invalid adopt configuration: topic_template "{aggregate_type} events": the text outside {column} or {column|lower} may only hold letters, digits and . _ - : $
}

// Undoing an adoption drops the triggers and functions; the team's table is left as it is.
func ExampleUnadoptStatements() {
	relay, _ := outbox.NewTable(outbox.Postgres, "outbox_events_relay")
	stmts, _ := outbox.UnadoptStatements(relay, seed004Mapping, false)
	for _, s := range stmts {
		fmt.Println(s)
	}
	// Output:
	// DROP TRIGGER IF EXISTS outbox_events_relay_adopt_forward ON "outbox_events"
	// DROP FUNCTION IF EXISTS outbox_events_relay_adopt_forward(), outbox_events_relay_adopt_mark() CASCADE
	// DROP FUNCTION IF EXISTS outbox_events_relay_adopt_headers(jsonb)
}
