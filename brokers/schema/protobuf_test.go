package schema

import (
	"context"
	"testing"

	"github.com/bufbuild/protocompile"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

const orderProto = `syntax = "proto3";
package outboxkit.test;

import "google/protobuf/timestamp.proto";

message Order {
  enum Status { NEW = 0; SHIPPED = 1; }
  message Item { string sku = 1; int32 qty = 2; }
  string id = 1;
  int64 amount = 2;
  int32 qty = 3;
  double price = 4;
  bool paid = 5;
  Status status = 6;
  optional string note = 7;
  repeated string tags = 8;
  repeated Item items = 9;
  map<string, int64> attrs = 10;
  bytes blob = 11;
  google.protobuf.Timestamp placed_at = 12;
  oneof payment {
    string card = 13;
    string iban = 14;
  }
  uint64 big = 15;
}

message Refund {
  message Line { string sku = 1; }
  string order_id = 1;
  int64 amount = 2;
  repeated Line lines = 3;
}
`

// registerAs registers text of type typ under subject in the test registry and returns its id.
func registerAs(t testing.TB, cl *sr.Client, subject string, typ sr.SchemaType, text string) int {
	t.Helper()
	ss, err := cl.CreateSchema(context.Background(), subject, sr.Schema{Schema: text, Type: typ})
	if err != nil {
		t.Fatalf("register %s under %s: %v", typ, subject, err)
	}
	return ss.ID
}

// compiled is the registered .proto compiled here, to read encoded bodies back.
func compiled(t *testing.T, name protoreflect.FullName) protoreflect.MessageDescriptor {
	t.Helper()
	files, err := (&protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(map[string]string{"o.proto": orderProto})})}).
		Compile(context.Background(), "o.proto")
	if err != nil {
		t.Fatal(err)
	}
	d, err := files.AsResolver().FindDescriptorByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return d.(protoreflect.MessageDescriptor)
}

// TestProtobufEncodeReadsBack: the relay encodes JSON with the registered .proto's message; the
// header has the schema id and the message indexes of the message the event type names (the
// first message by default), and the body decodes to the same values.
func TestProtobufEncodeReadsBack(t *testing.T) {
	cl, _, topic, _ := registry(t)
	topic += "_pb"
	id := registerAs(t, cl, Subject(topic), sr.TypeProtobuf, orderProto)
	enc, err := NewEncoder(cl, Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		eventType string
		name      protoreflect.FullName
		index     []int
		payload   string
		want      string // protojson of the decoded body
	}{
		{"", "outboxkit.test.Order", []int{0},
			`{"id":"o-1","amount":9007199254740993,"qty":-3,"price":12.25,"paid":true,"status":"SHIPPED","note":"",
			  "tags":["a"],"items":[{"sku":"x","qty":2}],"attrs":{"w":"7"},"blob":"AAEC","placed_at":"2026-12-07T10:00:00Z",
			  "iban":"DE00","big":"18446744073709551615"}`,
			`{"id":"o-1","amount":"9007199254740993","qty":-3,"price":12.25,"paid":true,"status":"SHIPPED","note":"",
			  "tags":["a"],"items":[{"sku":"x","qty":2}],"attrs":{"w":"7"},"blob":"AAEC","placedAt":"2026-12-07T10:00:00Z",
			  "iban":"DE00","big":"18446744073709551615"}`},
		{"order.created", "outboxkit.test.Order", []int{0}, `{"id":"o-2","status":1}`, `{"id":"o-2","status":"SHIPPED"}`},
		{"outboxkit.test.Refund", "outboxkit.test.Refund", []int{1}, `{"orderId":"o-1","amount":"5"}`, `{"orderId":"o-1","amount":"5"}`},
		{"outboxkit.test.Refund.Line", "outboxkit.test.Refund.Line", []int{1, 0}, `{"sku":"s"}`, `{"sku":"s"}`},
	} {
		out, err := enc.EncodeEvent(context.Background(), topic, tc.eventType, []byte(tc.payload))
		if err != nil {
			t.Fatalf("%s: %v", tc.payload, err)
		}
		var header sr.ConfluentHeader
		gotID, rest, err := header.DecodeID(out)
		if err != nil || gotID != id {
			t.Fatalf("%s: id %d err %v, want id %d", tc.payload, gotID, err, id)
		}
		index, body, err := header.DecodeIndex(rest, 8)
		if err != nil || !equalInts(index, tc.index) {
			t.Fatalf("%s: message indexes %v err %v, want %v", tc.payload, index, err, tc.index)
		}
		md := compiled(t, tc.name)
		msg := dynamicpb.NewMessage(md)
		if err := proto.Unmarshal(body, msg); err != nil {
			t.Fatal(err)
		}
		want := dynamicpb.NewMessage(md)
		if err := protojson.Unmarshal([]byte(tc.want), want); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(msg, want) {
			t.Errorf("%s:\n decoded %v\n want    %v", tc.payload, msg, want)
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestProtobufMismatchIsPermanentWithFieldPath: a payload that does not fit the message names
// the field path and the reason, and is not retriable.
func TestProtobufMismatchIsPermanentWithFieldPath(t *testing.T) {
	cl, _, topic, _ := registry(t)
	topic += "_pb"
	registerAs(t, cl, Subject(topic), sr.TypeProtobuf, orderProto)
	enc, err := NewEncoder(cl, Config{})
	if err != nil {
		t.Fatal(err)
	}
	checkMismatches(t, enc, topic, []mismatchCase{
		{`{"items":[{"sku":"a","qty":1},{"sku":"b","qty":"two"}]}`, "$.items[1].qty", "two is not an int32 (an integer in range)"},
		{`{"colour":"red"}`, "$.colour", "field is not in message outboxkit.test.Order"},
		{`{"qty":4294967296}`, "$.qty", "4294967296 is not an int32 (an integer in range)"},
		{`{"big":-1}`, "$.big", "-1 is not a uint64 (an integer in range)"},
		{`{"status":"LOST"}`, "$.status", `"LOST" is not a value of enum outboxkit.test.Order.Status`},
		{`{"card":"4111","iban":"DE00"}`, "$.iban", "oneof payment is already set by field card"},
		{`{"blob":"not base64!"}`, "$.blob", "not base64 (bytes): illegal base64 data at input byte 3"},
		{`{"paid":"yes"}`, "$.paid", "want a boolean, got a string"},
		{`{"attrs":{"w":true}}`, "$.attrs.w", "want an integer, got a boolean"},
		{`{"tags":"a"}`, "$.tags", "want an array (repeated field), got a string"},
		{`{"placed_at":"yesterday"}`, "$.placed_at", `not a google.protobuf.Timestamp: invalid google.protobuf.Timestamp value "yesterday"`},
		{`[1]`, "$", "want an object (message outboxkit.test.Order), got an array"},
		{`not json`, "$", "not JSON: invalid character 'o' in literal null (expecting 'u')"},
	})
}

// TestProtobufSchemaThatDoesNotCompileIsARegistryError: a registered schema the relay cannot
// use is the registry side's problem (retriable, an operator fixes it), named with the
// compiler's reason; the cached codec is not replaced by a broken one.
func TestProtobufSchemaThatDoesNotCompileIsARegistryError(t *testing.T) {
	_, err := newCodec(context.Background(), nil, sr.SubjectSchema{ID: 7, Schema: sr.Schema{Type: sr.TypeProtobuf,
		Schema: "syntax = \"proto3\";\nmessage A { Missing m = 1; }\n"}})
	if err == nil || err.Error() != `schema 7 does not parse as PROTOBUF: registered.proto:2:13: field A.m: unknown type Missing` {
		t.Fatalf("err %v", err)
	}
	_, err = newCodec(context.Background(), nil, sr.SubjectSchema{ID: 8, Schema: sr.Schema{Type: sr.TypeProtobuf,
		Schema: "syntax = \"proto3\";\nenum E { A = 0; }\n"}})
	if err == nil || err.Error() != `schema 8 does not parse as PROTOBUF: it declares no message` {
		t.Fatalf("err %v", err)
	}
}
