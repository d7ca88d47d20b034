package schema

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// TestDecoderReadsBackTheThreeFormats: events the decorator published into the real Kafka, read
// from the topic and decoded with the schema their id names, are their JSON again: Avro with the
// schema's defaults filled in, Protobuf in canonical JSON, JSON Schema as written.
func TestDecoderReadsBackTheThreeFormats(t *testing.T) {
	cl, _, _, _ := registry(t)
	dec, err := NewDecoder(cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		typ      sr.SchemaType
		text     string
		payloads []string
		types    []string
		wants    []string
	}{
		{sr.TypeAvro, orderSchema,
			[]string{`{"id":"o-1","amount":9007199254740993,"qty":3,"price":1.5,"paid":true,"status":"NEW","items":[{"sku":"a","qty":1}]}`},
			[]string{""},
			[]string{`{"id":"o-1","amount":9007199254740993,"qty":3,"price":1.5,"paid":true,"status":"NEW","items":[{"sku":"a","qty":1}],
			  "note":null,"tags":[],"attrs":{}}`}},
		{sr.TypeAvro, `{"type":"record","name":"U","fields":[{"name":"a","type":["null",{"type":"record","name":"I",
			"fields":[{"name":"x","type":"int"}]}]},{"name":"b","type":["string","long"]},{"name":"f","type":"bytes"}]}`,
			[]string{`{"a":{"x":1},"b":5,"f":"hi"}`, `{"a":null,"b":"five","f":""}`},
			[]string{"", ""},
			[]string{`{"a":{"x":1},"b":5,"f":"hi"}`, `{"a":null,"b":"five","f":""}`}},
		{sr.TypeProtobuf, orderProto,
			[]string{`{"id":"o-3","amount":12,"status":1,"placed_at":"2026-12-07T10:00:00.5Z","card":"4111"}`, `{"sku":"s"}`},
			[]string{"", "outboxkit.test.Refund.Line"},
			[]string{`{"id":"o-3","amount":"12","status":"SHIPPED","placedAt":"2026-12-07T10:00:00.500Z","card":"4111"}`, `{"sku":"s"}`}},
		{sr.TypeJSON, orderJSONSchema,
			[]string{`{"id":"o-1","amount":9007199254740993,"status":"NEW","items":[]}`},
			[]string{""},
			[]string{`{"id":"o-1","amount":9007199254740993,"status":"NEW","items":[]}`}},
	} {
		brokers, topic, _ := publishThrough(t, tc.typ, tc.text, tc.payloads, tc.types)
		records := testsupport.ReadKafkaTopic(t, brokers, topic)
		if len(records) != len(tc.payloads) {
			t.Fatalf("%s: %d records, want %d", tc.typ, len(records), len(tc.payloads))
		}
		for i, r := range records {
			out, err := dec.Decode(context.Background(), r.Value)
			if err != nil {
				t.Fatalf("%s record %d: %v", tc.typ, i, err)
			}
			got, want := decodeNumbers(t, string(out)), decodeNumbers(t, tc.wants[i])
			if !reflect.DeepEqual(normalize(got), normalize(want)) {
				t.Errorf("%s record %d:\n decoded %s\n want    %s", tc.typ, i, out, tc.wants[i])
			}
		}
	}
}

// TestDecoderFailuresAreClassified: a payload without the wire format's header, a body that is
// not of its schema and Protobuf indexes that name no message are permanent *DecodeErrors; an id
// the registry does not know is a retriable *RegistryError.
func TestDecoderFailuresAreClassified(t *testing.T) {
	cl, _, topic, id := registry(t)
	protoID := registerAs(t, cl, Subject(topic+"_pb"), sr.TypeProtobuf, orderProto)
	dec, err := NewDecoder(cl)
	if err != nil {
		t.Fatal(err)
	}
	frame := func(id int, body ...byte) []byte {
		var h sr.ConfluentHeader
		out, _ := h.AppendEncode(nil, id, nil)
		return append(out, body...)
	}
	for _, tc := range []struct {
		payload []byte
		want    string
	}{
		{[]byte(`{"n":1}`), "schema: cannot decode the payload: no Confluent wire format header (magic byte 0 and a 4-byte schema id)"},
		{frame(id, 0x02), "schema: cannot decode the payload with schema " + itoa(id) + ": not Avro of this schema: "},
		{frame(protoID, 0x02, 0x0a), "schema: cannot decode the payload with schema " + itoa(protoID) + ": message indexes [5] name no message of the schema"},
	} {
		_, err := dec.Decode(context.Background(), tc.payload)
		var decErr *DecodeError
		if !errors.As(err, &decErr) || Retriable(err) || len(err.Error()) < len(tc.want) || err.Error()[:len(tc.want)] != tc.want {
			t.Errorf("% x: err %v, want a permanent %q", tc.payload, err, tc.want)
		}
	}
	_, err = dec.Decode(context.Background(), frame(1<<30))
	var regErr *RegistryError
	if !errors.As(err, &regErr) || regErr.ID != 1<<30 || !Retriable(err) {
		t.Errorf("unknown id: err %v, want a retriable *RegistryError with the id", err)
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// TestDecoderMiddlewareHandsTheHandlerJSON: the Watermill middleware gives the handler a copy
// with the JSON payload (metadata kept) and leaves the received message as it was; a payload it
// cannot decode fails the handler without calling it.
func TestDecoderMiddlewareHandsTheHandlerJSON(t *testing.T) {
	cl, _, topic, _ := registry(t)
	enc, dec := codecs(t, cl)
	framed, err := enc.Encode(context.Background(), topic, []byte(validOrder("m-1")))
	if err != nil {
		t.Fatal(err)
	}
	var seen []*message.Message
	handler := dec.Middleware(func(msg *message.Message) ([]*message.Message, error) {
		seen = append(seen, msg)
		return nil, nil
	})
	msg := orderMessage("K", 3, "")
	msg.Payload = framed
	if _, err := handler(msg); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 || seen[0].UUID != msg.UUID || seen[0].Metadata.Get("seq") != "3" || string(msg.Payload) != string(framed) {
		t.Fatalf("handler saw %v; received message payload % x", seen, msg.Payload)
	}
	if got := decodeNumbers(t, string(seen[0].Payload)); got["id"] != "m-1" {
		t.Errorf("handler payload %s", seen[0].Payload)
	}
	bad := orderMessage("K", 4, `{"id":"plain json"}`)
	var decErr *DecodeError
	if _, err := handler(bad); !errors.As(err, &decErr) || len(seen) != 1 {
		t.Errorf("undecodable: err %v, handler calls %d; want a *DecodeError and no call", err, len(seen))
	}
}
