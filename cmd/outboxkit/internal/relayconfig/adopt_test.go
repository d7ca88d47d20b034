package relayconfig_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/outboxkit/outboxkit/cmd/outboxkit/internal/relayconfig"
	"github.com/outboxkit/outboxkit/outbox"
)

// TestAdoptExampleParses: the mapping file shipped with the CLI is valid.
func TestAdoptExampleParses(t *testing.T) {
	cfg, err := relayconfig.LoadAdopt("../../adopt.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Table != "outbox_events" || cfg.Columns.EventID != "id" || cfg.Columns.NextRetryAt != "next_retry_at" ||
		cfg.TopicTemplate != "{aggregate_type|lower}.events" || cfg.Status.Failed != "FAILED" {
		t.Errorf("parsed %+v", cfg)
	}
}

// TestAdoptMappingErrorsNameTheKey: unknown keys, wrong shapes and invalid values are refused
// with the key and what is allowed.
func TestAdoptMappingErrorsNameTheKey(t *testing.T) {
	base := "table: t\ntopic_template: \"{a}.events\"\ncolumns:\n  event_id: id\n  aggregate_id: a\n  event_type: e\n"
	for _, tc := range []struct{ doc, want string }{
		{base + "tabel: x\n", "tabel: unknown key (line 7; allowed: schema, table, topic_template, columns, status)"},
		{base + "status:\n  done: X\n", "status.done: unknown key (line 8; allowed: pending, published, failed)"},
		{strings.Replace(base, "  event_id: id\n", "  id: id\n", 1), "columns.id: unknown key"},
		{strings.Replace(base, "  event_id: id\n", "", 1), "columns.event_id is required"},
		{base + "columns: [a]\n", "columns: set twice"},
		{"table: t\ncolumns: x\n", "columns: must be a mapping of keys, got"},
		{strings.Replace(base, "{a}.events", "a events", 1), "topic_template"},
		{base + "status:\n  pending: \"P'\"\n", "status.pending"},
		{"- a\n", "must be a mapping"},
	} {
		_, err := relayconfig.ParseAdopt([]byte(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseAdopt(%q): %v; want an error containing %q", tc.doc, err, tc.want)
		}
	}
	_, err := relayconfig.ParseAdopt([]byte(strings.Replace(base, "  event_id: id\n", "", 1)))
	if !errors.Is(err, outbox.ErrInvalidAdoptConfig) {
		t.Errorf("missing event_id: %v, want ErrInvalidAdoptConfig", err)
	}
}
