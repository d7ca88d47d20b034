package schema

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
)

const orderJSONSchema = `{
  "$schema": "http://json-schema.org/draft-07/schema#",
  "title": "outboxkit.test.Order",
  "type": "object",
  "additionalProperties": false,
  "required": ["id", "amount", "status", "items"],
  "properties": {
    "id": {"type": "string", "minLength": 1},
    "amount": {"type": "integer"},
    "price": {"type": "number", "minimum": 0},
    "status": {"enum": ["NEW", "SHIPPED"]},
    "note": {"type": ["string", "null"]},
    "items": {"type": "array", "items": {"$ref": "#/definitions/item"}},
    "attrs": {"type": "object", "additionalProperties": {"type": "integer"}}
  },
  "definitions": {
    "item": {"type": "object", "required": ["sku", "qty"],
             "properties": {"sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1}}}
  }
}`

// TestJSONSchemaEncodeFramesThePayload: a payload valid against the registered JSON Schema is
// published as it is, behind the Confluent header with the schema's id.
func TestJSONSchemaEncodeFramesThePayload(t *testing.T) {
	cl, _, topic, _ := registry(t)
	topic += "_json"
	id := registerAs(t, cl, Subject(topic), sr.TypeJSON, orderJSONSchema)
	enc, err := NewEncoder(cl, Config{})
	if err != nil {
		t.Fatal(err)
	}
	payload := []byte(`{"id":"o-1","amount":9007199254740993,"price":1.5,"status":"NEW","note":null,
		"items":[{"sku":"a","qty":1}],"attrs":{"w":7}}`)
	out, err := enc.Encode(context.Background(), topic, payload)
	if err != nil {
		t.Fatal(err)
	}
	var header sr.ConfluentHeader
	gotID, body, err := header.DecodeID(out)
	if err != nil || gotID != id || !bytes.Equal(body, payload) {
		t.Fatalf("id %d err %v body %s; want id %d and the payload", gotID, err, body, id)
	}
}

// TestJSONSchemaMismatchIsPermanentWithInstancePath: a payload the schema refuses names the
// instance path (as $.a[1].b) and the validator's reason, and is not retriable.
func TestJSONSchemaMismatchIsPermanentWithInstancePath(t *testing.T) {
	cl, _, topic, _ := registry(t)
	topic += "_json"
	registerAs(t, cl, Subject(topic), sr.TypeJSON, orderJSONSchema)
	enc, err := NewEncoder(cl, Config{})
	if err != nil {
		t.Fatal(err)
	}
	base := `"id":"o","amount":1,"status":"NEW"`
	checkMismatches(t, enc, topic, []mismatchCase{
		{`{` + base + `,"items":[{"sku":"a","qty":1},{"sku":"b","qty":"two"}]}`, "$.items[1].qty", "got string, want integer"},
		{`{` + base + `,"items":[{"sku":"a","qty":0}]}`, "$.items[0].qty", "minimum: got 0, want 1"},
		{`{"id":"o","amount":1,"items":[]}`, "$", "missing property 'status'"},
		{`{` + base + `,"items":[],"colour":"red"}`, "$", "additional properties 'colour' not allowed"},
		{`{"id":"o","amount":1.5,"status":"NEW","items":[]}`, "$.amount", "got number, want integer"},
		{`{"id":"o","amount":1,"status":"LOST","items":[]}`, "$.status", "value must be one of 'NEW', 'SHIPPED'"},
		{`{` + base + `,"items":[],"attrs":{"a.b":"x"}}`, "$.attrs.a.b", "got string, want integer"},
		{`not json`, "$", "not JSON: invalid character 'o' in literal null (expecting 'u')"},
	})
}

// TestJSONSchemaRefOutsideTheSchemaIsRefused: a registered schema whose $ref points outside it
// (a local file, the network) is not loaded: the lookup fails (retriable, for an operator to fix)
// instead of the relay reading files or URLs a schema names.
func TestJSONSchemaRefOutsideTheSchemaIsRefused(t *testing.T) {
	local := filepath.Join(t.TempDir(), "s.json")
	if err := os.WriteFile(local, []byte(`{"type":"string"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"file://" + local, "http://127.0.0.1:1/s.json"} {
		_, err := newCodec(context.Background(), nil, sr.SubjectSchema{ID: 9, Schema: sr.Schema{Type: sr.TypeJSON,
			Schema: `{"properties":{"a":{"$ref":"` + ref + `"}}}`}})
		if err == nil || !strings.HasPrefix(err.Error(), "schema 9 does not parse as JSON: ") || !strings.Contains(err.Error(), ref) {
			t.Errorf("$ref %s: err %v, want a refusal naming it", ref, err)
		}
	}
}
