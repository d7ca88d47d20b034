package schema

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/bufbuild/protocompile"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// protoFileName is the name the registered .proto text is compiled under; it appears in nothing
// that is published.
const protoFileName = "registered.proto"

// protoCodec encodes with a registered Protobuf schema: the .proto text compiled into descriptors
// with github.com/bufbuild/protocompile, the JSON payload converted guided by the message's
// descriptor into a dynamicpb message (protojson.go) and marshalled by google.golang.org/protobuf.
//
// A payload is first encoded straight from the JSON to the wire format (protodirect.go); the
// path through dynamicpb runs for the payloads that one leaves alone (one that does not fit, or
// holds what it does not take), and words the errors.
type protoCodec struct {
	file   protoreflect.FileDescriptor
	direct protoDirect
	// first is the message encoded when the event's type names no message of the file.
	first protoreflect.MessageDescriptor
}

// newProtoCodec compiles text with the schemas it references as the files it imports by their
// reference names.
func newProtoCodec(ctx context.Context, text string, refs []reference) (codec, error) {
	sources := map[string]string{protoFileName: text}
	for _, r := range refs {
		sources[r.name] = r.text
	}
	compiler := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
			Accessor: protocompile.SourceAccessorFromMap(sources),
		}),
	}
	files, err := compiler.Compile(ctx, protoFileName)
	if err != nil {
		return nil, err
	}
	file := files.FindFileByPath(protoFileName)
	if file == nil {
		return nil, errors.New("the compiler returned no file")
	}
	if file.Messages().Len() == 0 {
		return nil, errors.New("it declares no message")
	}
	return protoCodec{file: file, direct: newProtoDirect(file), first: file.Messages().Get(0)}, nil
}

// encode encodes payload as the message the event's type names by its full name (for example
// shop.v1.OrderPlaced), or else as the file's first message; index is that message's position
// in the file, as the wire format's message indexes say it.
func (c protoCodec) encode(payload []byte, record string) ([]int, []byte, *mismatch) {
	md := c.message(record)
	if body, ok := c.direct.encode(md, payload); ok {
		return messageIndex(md), body, nil
	}
	return c.encodeGeneric(md, payload)
}

// appendFramed writes the wire format's header (magic byte, schema id, message indexes) and the
// payload's encoding by the direct path in one buffer.
func (c protoCodec) appendFramed(id int, payload []byte, record string) ([]byte, bool) {
	md := c.message(record)
	var header sr.ConfluentHeader
	buf, err := header.AppendEncode(make([]byte, 0, 8+len(payload)), id, c.direct.index(md))
	if err != nil {
		return nil, false
	}
	return c.direct.appendEncode(buf, md, payload)
}

// encodeGeneric encodes payload as md through a dynamicpb message.
func (c protoCodec) encodeGeneric(md protoreflect.MessageDescriptor, payload []byte) ([]int, []byte, *mismatch) {
	decoded, m := decodeJSON(payload)
	if m != nil {
		return nil, nil, m
	}
	msg := dynamicpb.NewMessage(md)
	if m := toProto(msg, decoded, "$"); m != nil {
		return nil, nil, m
	}
	body, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
	if err != nil {
		return nil, nil, &mismatch{"$", fmt.Sprintf("marshalling message %s: %v", md.FullName(), err)}
	}
	return messageIndex(md), body, nil
}

// message returns the message of the file named record (at any depth), else the first one.
func (c protoCodec) message(record string) protoreflect.MessageDescriptor {
	if record != "" {
		if d := findMessage(c.file.Messages(), protoreflect.FullName(record)); d != nil {
			return d
		}
	}
	return c.first
}

func findMessage(msgs protoreflect.MessageDescriptors, name protoreflect.FullName) protoreflect.MessageDescriptor {
	for i := range msgs.Len() {
		md := msgs.Get(i)
		if md.FullName() == name {
			return md
		}
		if nested := findMessage(md.Messages(), name); nested != nil {
			return nested
		}
	}
	return nil
}

// messageIndex is md's path in its file: its index among the top-level messages, then among its
// parent's nested messages, and so on.
func messageIndex(md protoreflect.MessageDescriptor) []int {
	var index []int
	for d := protoreflect.Descriptor(md); d != nil; d = d.Parent() {
		if _, ok := d.(protoreflect.MessageDescriptor); !ok {
			break
		}
		index = append(index, d.Index())
	}
	slices.Reverse(index)
	return index
}

// decode reads the message indexes, then the message they name, and returns it in protobuf's
// canonical JSON (compacted: protojson varies its whitespace on purpose).
func (c protoCodec) decode(body []byte) ([]byte, *mismatch) {
	var header sr.ConfluentHeader
	index, rest, err := header.DecodeIndex(body, maxMessageDepth)
	if err != nil {
		return nil, &mismatch{"$", "no message indexes: " + err.Error()}
	}
	md, m := c.messageAt(index)
	if m != nil {
		return nil, m
	}
	msg := dynamicpb.NewMessage(md)
	if err := proto.Unmarshal(rest, msg); err != nil {
		return nil, &mismatch{"$", fmt.Sprintf("not a %s: %v", md.FullName(), err)}
	}
	text, err := protojson.Marshal(msg)
	if err != nil {
		return nil, &mismatch{"$", fmt.Sprintf("no JSON for the %s: %v", md.FullName(), err)}
	}
	var out bytes.Buffer
	if err := json.Compact(&out, text); err != nil {
		return nil, &mismatch{"$", err.Error()}
	}
	return out.Bytes(), nil
}

// maxMessageDepth bounds the message indexes read from a payload.
const maxMessageDepth = 32

// messageAt returns the message the indexes name: the index among the file's messages, then
// among that message's nested ones, and so on.
func (c protoCodec) messageAt(index []int) (protoreflect.MessageDescriptor, *mismatch) {
	msgs := c.file.Messages()
	var md protoreflect.MessageDescriptor
	for _, i := range index {
		if i < 0 || i >= msgs.Len() {
			return nil, &mismatch{"$", fmt.Sprintf("message indexes %v name no message of the schema", index)}
		}
		md = msgs.Get(i)
		msgs = md.Messages()
	}
	if md == nil {
		return nil, &mismatch{"$", "empty message indexes"}
	}
	return md, nil
}
