package schema

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/types/descriptorpb"
)

// order is a consumer's Go type of orderSchema's records.
type order struct {
	ID     string  `json:"id"`
	Amount int64   `json:"amount"`
	Qty    int32   `json:"qty"`
	Price  float64 `json:"price"`
	Paid   bool    `json:"paid"`
	Status string  `json:"status"`
	Note   *string `json:"note"`
	Tags   []string
	Items  []struct {
		SKU string `json:"sku"`
		Qty int    `json:"qty"`
	} `json:"items"`
	Attrs map[string]int64 `json:"attrs"`
}

// optionProto mirrors descriptorpb.UninterpretedOption's scalar fields, so that the generated
// Go type reads what the registry's schema encodes.
const optionProto = `syntax = "proto3";
package outboxkit.test;
message Option {
  string identifier_value = 3;
  uint64 positive_int_value = 4;
  int64 negative_int_value = 5;
  double double_value = 6;
}
`

// DecodeAs reads the relay's events into Go types from the real registry: an Avro record into
// a struct (a long of 2^53+1 exact, a union, defaults, nested records, a map), Avro logical
// timestamps into time.Time, and a Protobuf message into its generated Go type (64-bit
// integers exact, through protojson).
func TestDecodeAsReadsIntoGoTypes(t *testing.T) {
	cl, _, topic, _ := registry(t)
	ctx := context.Background()
	registerAs(t, cl, Subject(topic+"_logical"), sr.TypeAvro, logicalSchema)
	registerAs(t, cl, Subject(topic+"_pb"), sr.TypeProtobuf, optionProto)
	enc, dec := codecs(t, cl)
	encode := func(topic, payload string) []byte {
		t.Helper()
		out, err := enc.Encode(ctx, topic, []byte(payload))
		if err != nil {
			t.Fatalf("encode %s: %v", payload, err)
		}
		return out
	}

	o, err := DecodeAs[order](ctx, dec, encode(topic, `{"id":"o-1","amount":9007199254740993,"qty":3,"price":12.5,"paid":true,
		"status":"SHIPPED","note":"fragile","items":[{"sku":"a","qty":1},{"sku":"b","qty":2}],"attrs":{"weight":7}}`))
	if err != nil {
		t.Fatal(err)
	}
	if o.ID != "o-1" || o.Amount != 9007199254740993 || o.Qty != 3 || o.Price != 12.5 || !o.Paid || o.Status != "SHIPPED" ||
		o.Note == nil || *o.Note != "fragile" || o.Tags == nil || len(o.Tags) != 0 || len(o.Items) != 2 || o.Items[1].SKU != "b" ||
		o.Items[1].Qty != 2 || o.Attrs["weight"] != 7 {
		t.Errorf("decoded %+v", o)
	}

	type logical struct {
		Day   string     `json:"day"`
		At    time.Time  `json:"at"`
		AtUS  time.Time  `json:"at_us"`
		Maybe *time.Time `json:"maybe"`
	}
	l, err := DecodeAs[logical](ctx, dec, encode(topic+"_logical", `{"day":"2026-12-07","at":"2026-12-07T10:00:00.123Z",
		"at_us":"2026-12-07T11:00:00.000001+01:00","local":"2026-12-07T10:00:00","opens":"08:30:00.5",
		"id":"0b8f1f5e-8a8e-4c39-9a34-3c5d3f0b8e2a","price":12.5}`))
	if err != nil {
		t.Fatal(err)
	}
	if l.Day != "2026-12-07" || !l.At.Equal(time.Date(2026, 12, 7, 10, 0, 0, 123e6, time.UTC)) ||
		!l.AtUS.Equal(time.Date(2026, 12, 7, 10, 0, 0, 1000, time.UTC)) || l.Maybe != nil {
		t.Errorf("decoded %+v", l)
	}

	opt, err := DecodeAs[*descriptorpb.UninterpretedOption](ctx, dec, encode(topic+"_pb",
		`{"identifierValue":"x","positiveIntValue":"18446744073709551615","negativeIntValue":-9007199254740993,"doubleValue":0.5}`))
	if err != nil {
		t.Fatal(err)
	}
	if opt.GetIdentifierValue() != "x" || opt.GetPositiveIntValue() != 18446744073709551615 ||
		opt.GetNegativeIntValue() != -9007199254740993 || opt.GetDoubleValue() != 0.5 {
		t.Errorf("decoded %v", opt)
	}
}

// A payload that does not read into the type is a permanent *DecodeError naming the type; the
// Handler calls its function with the decoded value, and not at all for such a payload.
func TestDecodeAsFailuresAndHandler(t *testing.T) {
	cl, _, topic, id := registry(t)
	ctx := context.Background()
	enc, dec := codecs(t, cl)
	framed, err := enc.Encode(ctx, topic, []byte(validOrder("h-1")))
	if err != nil {
		t.Fatal(err)
	}
	type wrong struct {
		ID int `json:"id"`
	}
	_, err = DecodeAs[wrong](ctx, dec, framed)
	var decErr *DecodeError
	if !errors.As(err, &decErr) || decErr.ID != id || Retriable(err) || !strings.Contains(err.Error(), "does not read into schema.wrong: ") {
		t.Errorf("into the wrong type: %v, want a permanent DecodeError naming schema.wrong with id %d", err, id)
	}
	if _, err := DecodeAs[order](ctx, dec, []byte(`{"id":"plain"}`)); !errors.As(err, &decErr) || decErr.ID != 0 {
		t.Errorf("plain JSON: %v, want the DecodeError of a missing header", err)
	}

	var got []order
	h := Handler(dec, func(msg *message.Message, o order) error {
		got = append(got, o)
		return nil
	})
	msg := orderMessage("K", 1, "")
	msg.Payload = framed
	if err := h(msg); err != nil || len(got) != 1 || got[0].ID != "h-1" {
		t.Fatalf("handler: err %v, got %+v", err, got)
	}
	if err := h(orderMessage("K", 2, `{"id":"plain json"}`)); !errors.As(err, &decErr) || len(got) != 1 {
		t.Errorf("undecodable: err %v, calls %d; want a DecodeError and no call", err, len(got))
	}
}
