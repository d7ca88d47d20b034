package schema

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// DecodeAs decodes a Confluent-framed payload into a value of type T, the JSON Decode returns
// read into it: by protojson when T is a generated Protobuf message type (a pointer such as
// *orderpb.Order; fields the type does not know are skipped), else by encoding/json (a struct's
// json tags name the fields, unknown fields are skipped, so a consumer keeps reading a schema
// that gained fields). JSON forms to mind in a plain struct: an Avro logical timestamp or date is
// a string (time.Time reads RFC 3339), Avro bytes a string of the raw bytes, and a Protobuf
// 64-bit integer a string (tag the field `json:",string"`). A payload that does not read into T
// is a permanent *DecodeError naming T; the failures of Decode are returned as they are.
func DecodeAs[T any](ctx context.Context, d *Decoder, framed []byte) (T, error) {
	var v T
	data, err := d.Decode(ctx, framed)
	if err != nil {
		return v, err
	}
	if err := unmarshalInto(data, &v); err != nil {
		var header sr.ConfluentHeader
		id, _, _ := header.DecodeID(framed)
		return v, &DecodeError{ID: id, Reason: fmt.Sprintf("does not read into %s: %v", reflect.TypeFor[T](), err)}
	}
	return v, nil
}

// unmarshalInto reads data into *v, with protojson when T is a Protobuf message pointer.
func unmarshalInto[T any](data []byte, v *T) error {
	if t := reflect.TypeFor[T](); t.Kind() == reflect.Pointer && t.Implements(reflect.TypeFor[proto.Message]()) {
		m := reflect.New(t.Elem()).Interface().(proto.Message)
		if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(data, m); err != nil {
			return err
		}
		*v = m.(T)
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	return dec.Decode(v)
}

// Handler returns a Watermill handler (message.NoPublishHandlerFunc) that decodes each message's
// payload into a T with DecodeAs and calls h with the message and the value; a message that
// cannot be decoded fails without calling h, with the *DecodeError (permanent) or the
// *RegistryError (retriable).
func Handler[T any](d *Decoder, h func(msg *message.Message, v T) error) message.NoPublishHandlerFunc {
	return func(msg *message.Message) error {
		v, err := DecodeAs[T](msg.Context(), d, msg.Payload)
		if err != nil {
			return fmt.Errorf("schema: message %s: %w", msg.UUID, err)
		}
		return h(msg, v)
	}
}
