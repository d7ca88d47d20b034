package schema

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// scalarsProto has the kinds and shapes orderProto does not: every scalar kind, packed and
// unpacked repeated fields, maps with integer and boolean keys, proto2 presence and a closed
// enum, recursion, google.protobuf.Value and Struct.
const scalarsProto = `syntax = "proto2";
package outboxkit.test;

import "google/protobuf/struct.proto";

message Scalars {
  enum Kind { A = 0; B = 1; C = -2; }
  optional int32 i32 = 1;
  optional int64 i64 = 2;
  optional uint32 u32 = 3;
  optional uint64 u64 = 4;
  optional sint32 s32 = 5;
  optional sint64 s64 = 6;
  optional fixed32 f32 = 7;
  optional fixed64 f64 = 8;
  optional sfixed32 sf32 = 9;
  optional sfixed64 sf64 = 10;
  optional float fl = 11;
  optional double db = 12;
  optional bool ok = 13;
  optional Kind kind = 14;
  repeated int32 packed = 15 [packed = true];
  repeated sint64 unpacked = 16;
  map<int32, string> by_int = 17;
  map<bool, Scalars> by_bool = 18;
  optional Scalars next = 19;
  optional google.protobuf.Value any_value = 20;
  optional google.protobuf.Struct props = 21;
  map<uint64, double> by_uint = 22;
  repeated Kind kinds = 23;
  optional bytes raw = 24;
}
`

// protoDirectCases are payloads per schema and message (the event's record name): the generic
// path encodes each, and the direct path must encode them itself, to the same bytes.
var protoDirectCases = []struct{ text, record, payload string }{
	{orderProto, "", `{"id":"o-1","amount":"9007199254740993","qty":3,"price":12.25,"paid":true,"status":"SHIPPED","note":"n",` +
		`"tags":["a","b"],"items":[{"sku":"a","qty":1},{"sku":"b"}],"attrs":{"w":"7","h":12,"a":-1},"blob":"aGk=","big":"18446744073709551615"}`},
	{orderProto, "", `{"id":"","amount":0,"qty":0,"price":0,"paid":false,"status":"NEW","note":"","tags":[],"items":[],"attrs":{}}`},
	{orderProto, "", `{"price":-0.0,"status":1,"card":"4111","placedAt":"2026-12-07T10:00:00.5Z","id":"\u00e9\n"}`},
	{orderProto, "", `{"placed_at":"2026-12-07T10:00:00Z","iban":"","qty":-5,"amount":-9,"price":"NaN","items":[{"qty":-1,"sku":"é"}]}`},
	{orderProto, "outboxkit.test.Refund", `{"orderId":"o-1","amount":5,"lines":[{"sku":"a"},{}]}`},
	{orderProto, "outboxkit.test.Refund", `{"order_id":"o-1","lines":null,"amount":null}`},
	{orderProto, "outboxkit.test.Order.Item", `{"sku":"x","qty":2147483647}`},
	{scalarsProto, "", `{"i32":-1,"i64":"-9223372036854775808","u32":4294967295,"u64":0,"s32":-2147483648,"s64":-1,` +
		`"f32":1,"f64":"2","sf32":-3,"sf64":-4,"fl":3.4e38,"db":1e-300,"ok":false,"kind":"C","packed":[1,-1,300],` +
		`"unpacked":[-1,0,1],"byInt":{"10":"x","-2":"y","3":""},"byBool":{"true":{"i32":1},"false":{}},"next":{"next":{"ok":true}},` +
		`"anyValue":{"a":[1,"b",null]},"props":{"k":{"n":1}},"byUint":{"18446744073709551615":1.5,"0":0},"kinds":["B",0,"C"],"raw":"AAE"}`},
	{scalarsProto, "", `{"i32":0,"fl":0,"db":-0.0,"kind":"A","packed":[],"anyValue":null,"raw":"","by_int":{"1":"a"}}`},
	{scalarsProto, "", `{"fl":"-Infinity","db":"1e5","i64":"12","packed":[0]}`},
}

// TestProtobufDirectMatchesTheGenericPath: for every test payload the direct encoder writes the
// bytes the dynamicpb path writes, and takes the common shapes itself.
func TestProtobufDirectMatchesTheGenericPath(t *testing.T) {
	for _, tc := range protoDirectCases {
		c := mustProtoCodec(t, tc.text)
		md := c.message(tc.record)
		direct, ok := c.direct.encode(md, []byte(tc.payload))
		if !ok {
			t.Errorf("%.80s: the direct encoder left it to the generic path", tc.payload)
			continue
		}
		_, generic, m := c.encodeGeneric(md, []byte(tc.payload))
		if m != nil {
			t.Fatalf("%.80s: generic path: %s: %s", tc.payload, m.path, m.reason)
		}
		sameProto(t, md, tc.payload, direct, generic)
		index, _, _ := c.encode([]byte(tc.payload), tc.record)
		var header sr.ConfluentHeader
		want, _ := header.AppendEncode(nil, 7, index)
		if framed, ok := c.appendFramed(7, []byte(tc.payload), tc.record); !ok || !bytes.Equal(framed, append(want, direct...)) {
			t.Errorf("%.80s: framed %x, want %x then %x", tc.payload, framed, want, direct)
		}
	}
}

// TestProtobufDirectLeavesBadPayloadsToTheGenericPath: malformed JSON and payloads that do not
// fit get the generic path's error, word for word.
func TestProtobufDirectLeavesBadPayloadsToTheGenericPath(t *testing.T) {
	c := mustProtoCodec(t, scalarsProto)
	for _, p := range []string{
		``, `{`, `{"i32":1,}`, `{"i32":01}`, `{"i32":1} x`, `{"i32":1}}`, `[]`, `{"i32":"1.0"}`, `{"i32":2147483648}`,
		`{"u32":-1}`, `{"i32":1,"i32":2}`, `{"byInt":{"1":"a","01":"b"}}`, `{"byInt":{"x":"a"}}`, `{"kind":"D"}`,
		`{"kind":5}`, `{"fl":1e39}`, `{"db":"x"}`, `{"raw":"!!"}`, `{"ok":1}`, `{"next":[]}`, `{"props":[1]}`,
		`{"packed":[1,"x"]}`, `{"nope":1}`, `{"s32":"\u0031"}`, `{"byBool":{"yes":{}}}`, `{"anyValue":{"a":}}`,
		`{"i32":1,"s64":"` + "\xff" + `"}`, `{"packed":null,"unpacked":[null]}`, `{"i64":"+1"}`,
	} {
		compareProtoPaths(t, c, "", []byte(p))
	}
	// One key written two ways: the direct path leaves it to the generic one.
	if _, ok := c.direct.encode(c.message(""), []byte(`{"byInt":{"1":"a","01":"b"}}`)); ok {
		t.Error(`{"byInt":{"1":"a","01":"b"}}: the direct encoder took a key given twice`)
	}
	order := mustProtoCodec(t, orderProto)
	for _, p := range []string{`{"card":"a","iban":"b"}`, `{"placedAt":"yesterday"}`, `{"id":"a","id":"b"}`,
		`{"orderId":"x"}`, `{"tags":"a"}`, `{"items":[{"sku":1}]}`, `{"attrs":{"a":"b"}}`} {
		compareProtoPaths(t, order, "", []byte(p))
	}
}

// FuzzProtobufDirect: whatever the payload, the codec returns what the generic path returns. It
// fuzzes each schema and message of protoDirectCases (which picks one).
func FuzzProtobufDirect(f *testing.F) {
	type target struct {
		codec  protoCodec
		record string
	}
	var targets []target
	index := map[[2]string]uint8{}
	for _, tc := range protoDirectCases {
		key := [2]string{tc.text, tc.record}
		if _, ok := index[key]; !ok {
			index[key] = uint8(len(targets))
			targets = append(targets, target{mustProtoCodec(f, tc.text), tc.record})
		}
		f.Add(index[key], tc.payload)
	}
	f.Fuzz(func(t *testing.T, which uint8, p string) {
		tg := targets[int(which)%len(targets)]
		compareProtoPaths(t, tg.codec, tg.record, []byte(p))
	})
}

// compareProtoPaths checks that the codec's result for p equals the generic path's.
func compareProtoPaths(t *testing.T, c protoCodec, record string, p []byte) {
	t.Helper()
	md := c.message(record)
	_, got, gotM := c.encode(p, record)
	_, want, wantM := c.encodeGeneric(md, p)
	switch {
	case (gotM == nil) != (wantM == nil):
		t.Errorf("%q: codec mismatch %v, generic %v", p, gotM, wantM)
	case gotM != nil && *gotM != *wantM:
		t.Errorf("%q: codec says %s: %s, generic %s: %s", p, gotM.path, gotM.reason, wantM.path, wantM.reason)
	case gotM == nil:
		sameProto(t, md, string(p), got, want)
	}
}

// sameProto fails unless got and want are the same bytes.
func sameProto(t *testing.T, md protoreflect.MessageDescriptor, payload string, got, want []byte) {
	t.Helper()
	if bytes.Equal(got, want) {
		return
	}
	g, w := dynamicpb.NewMessage(md), dynamicpb.NewMessage(md)
	errG, errW := proto.Unmarshal(got, g), proto.Unmarshal(want, w)
	t.Errorf("%.80s:\n direct  %x (%v, equal when decoded: %v)\n generic %x (%v)", payload, got, errG, proto.Equal(g, w), want, errW)
}

func mustProtoCodec(t testing.TB, text string) protoCodec {
	t.Helper()
	c, err := newProtoCodec(context.Background(), strings.TrimSpace(text)+"\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	return c.(protoCodec)
}

// TestProtobufMapKeyGivenTwiceIsDeterministic: a map key written two ways ("1" and "01") is one
// key; the value kept must not depend on Go's map order.
func TestProtobufMapKeyGivenTwiceIsDeterministic(t *testing.T) {
	c := mustProtoCodec(t, scalarsProto)
	p := []byte(`{"byInt":{"1":"a","01":"b"}}`)
	_, first, m := c.encode(p, "")
	if m != nil {
		t.Fatalf("%s: %s: %s", p, m.path, m.reason)
	}
	for range 30 {
		if _, again, _ := c.encode(p, ""); !bytes.Equal(again, first) {
			t.Fatalf("%s encoded as %x, then as %x", p, first, again)
		}
	}
}
