package outbox_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// The writer refuses, before any SQL runs, a header the broker or the relay would overwrite or
// refuse (Watermill's reserved metadata, the relay's and the poison queue's keys) and headers
// whose total size could make the event, or its dead letter, too large for the broker. Each
// error names the header, or the size and the bound.
func TestWriterRejectsReservedAndOversizedHeaders(t *testing.T) {
	db := testsupport.OpenPostgres(t)
	w := testsupport.NewOutbox(t, db, outbox.Config{Dialect: outbox.Postgres, Table: testsupport.UniqueName("hdr")})
	half := strings.Repeat("v", outbox.MaxHeadersBytes/2)
	cases := []struct {
		name    string
		headers map[string]string
		want    string
	}{
		{"watermill uuid", map[string]string{"_watermill_message_uuid": "x"}, `header "_watermill_message_uuid" is reserved`},
		{"watermill prefix", map[string]string{"_watermill_anything": "x"}, `header "_watermill_anything" is reserved`},
		{"relay attempts", map[string]string{"outbox_attempts": "1"}, `header "outbox_attempts" is reserved`},
		{"poison reason", map[string]string{"reason_poisoned": "x"}, `header "reason_poisoned" is reserved`},
		{"poison topic", map[string]string{"topic_poisoned": "x"}, `header "topic_poisoned" is reserved`},
		{"oversized headers", map[string]string{"a": half, "b": half}, "headers are"},
	}
	ctx := context.Background()
	for _, tc := range cases {
		e := outbox.Event{Topic: "orders", AggregateType: "order", AggregateID: "o1", EventType: "OrderPlaced", Headers: tc.headers}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = w.WriteTx(ctx, tx, e)
		_ = tx.Rollback()
		if !errors.Is(err, outbox.ErrInvalidEvent) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want ErrInvalidEvent containing %q", tc.name, err, tc.want)
		}
		if tc.name == "oversized headers" && err != nil && !strings.Contains(err.Error(), "the limit is 65536") {
			t.Errorf("oversized headers: error %v does not name the bound", err)
		}
	}
	// Just under the bound: accepted.
	fits := outbox.Event{Topic: "orders", AggregateType: "order", AggregateID: "o1", EventType: "OrderPlaced",
		Headers: map[string]string{"a": strings.Repeat("v", outbox.MaxHeadersBytes-1)}}
	if err := fits.Validate(0); err != nil {
		t.Errorf("headers of %d bytes refused: %v", outbox.MaxHeadersBytes, err)
	}
}
