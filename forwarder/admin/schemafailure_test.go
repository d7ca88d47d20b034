package admin_test

import (
	"testing"

	"github.com/outboxkit/outboxkit/forwarder/admin"
)

// The events one schema version refuses at one field path for one reason are one failure group
// whatever their topic's numbers, array indexes and schema ids; another version of the subject
// is another group; and the group names the subject, version, path and reason.
func TestSchemaMismatchesGroupBySubjectVersionPathAndReason(t *testing.T) {
	const (
		a = `schema: topic "orders_1f2e": message 3: payload does not fit the schema of subject "orders-v2-value" version 2 (schema id 17) at $.items[1].qty: want an integer, got a string`
		b = `schema: topic "orders_1f2e": message 0: payload does not fit the schema of subject "orders-v2-value" version 2 (schema id 17) at $.items[7].qty: want an integer, got a string`
		c = `schema: topic "orders_1f2e": message 3: payload does not fit the schema of subject "orders-v2-value" version 3 (schema id 18) at $.items[1].qty: want an integer, got a string`
	)
	if admin.Fingerprint(a) != admin.Fingerprint(b) {
		t.Errorf("two events refused by version 2 at $.items[<n>].qty are in two groups:\n%s\n%s", admin.NormaliseError(a), admin.NormaliseError(b))
	}
	if admin.Fingerprint(a) == admin.Fingerprint(c) {
		t.Errorf("events refused by versions 2 and 3 are in one group: %s", admin.NormaliseError(a))
	}
	got := admin.SchemaFailureOf(admin.NormaliseError(a))
	want := admin.SchemaFailure{Subject: "orders-v2-value", Version: 2, Path: "$.items[<n>].qty", Reason: "want an integer, got a string"}
	if got == nil || *got != want {
		t.Fatalf("SchemaFailureOf(%q) = %+v, want %+v", admin.NormaliseError(a), got, want)
	}
	if sf := admin.SchemaFailureOf(admin.NormaliseError("kafka: broker refused the record: MESSAGE_TOO_LARGE")); sf != nil {
		t.Fatalf("a broker error read as a schema failure: %+v", sf)
	}
	// Texts without a schema's subject and version normalise as before.
	if got, want := admin.NormaliseError("event 42 failed at 10.0.0.1:9092"), "event <n> failed at <addr>"; got != want {
		t.Fatalf("NormaliseError = %q, want %q", got, want)
	}
}
