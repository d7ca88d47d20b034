package schema

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// toProto fills msg from a decoded JSON value by the proto3 JSON mapping (fields by their JSON
// or proto name, 64-bit integers as numbers or strings, bytes as base64, enums by name or
// number, null as the field's default), naming the path of the first value that does not fit.
// Well-known types (Timestamp, Duration, Struct, wrappers, ...) are read by protojson.
func toProto(msg protoreflect.Message, v any, path string) *mismatch {
	md := msg.Descriptor()
	if wellKnown(md) {
		return wellKnownToProto(msg, v, path)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return &mismatch{path, fmt.Sprintf("want an object (message %s), got %s", md.FullName(), jsonKind(v))}
	}
	fields := md.Fields()
	names := make([]string, 0, len(obj))
	for name := range obj {
		names = append(names, name)
	}
	slices.Sort(names) // the first mismatch reported is the same every time
	for _, name := range names {
		fieldPath := path + "." + name
		fd := fields.ByJSONName(name)
		if fd == nil {
			fd = fields.ByTextName(name)
		}
		if fd == nil {
			return &mismatch{fieldPath, fmt.Sprintf("field is not in message %s", md.FullName())}
		}
		raw := obj[name]
		if raw == nil && !nullIsAValue(fd) {
			continue // null is the field's default
		}
		if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() {
			if set := msg.WhichOneof(od); set != nil {
				return &mismatch{fieldPath, fmt.Sprintf("oneof %s is already set by field %s", od.Name(), set.JSONName())}
			}
		}
		if m := setField(msg, fd, raw, fieldPath); m != nil {
			return m
		}
	}
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.Cardinality() == protoreflect.Required && !msg.Has(fd) {
			return &mismatch{path + "." + fd.JSONName(), "required field is missing"}
		}
	}
	return nil
}

// nullIsAValue reports a field whose JSON null is a value, not its default: a singular
// google.protobuf.Value (its null_value).
func nullIsAValue(fd protoreflect.FieldDescriptor) bool {
	return !fd.IsList() && !fd.IsMap() && fd.Message() != nil && fd.Message().FullName() == "google.protobuf.Value"
}

func setField(msg protoreflect.Message, fd protoreflect.FieldDescriptor, raw any, path string) *mismatch {
	switch {
	case fd.IsList():
		items, ok := raw.([]any)
		if !ok {
			return &mismatch{path, "want an array (repeated field), got " + jsonKind(raw)}
		}
		list := msg.Mutable(fd).List()
		for i, item := range items {
			val, m := protoValue(fd, list.NewElement, item, path+"["+strconv.Itoa(i)+"]")
			if m != nil {
				return m
			}
			list.Append(val)
		}
	case fd.IsMap():
		obj, ok := raw.(map[string]any)
		if !ok {
			return &mismatch{path, "want an object (map field), got " + jsonKind(raw)}
		}
		mp := msg.Mutable(fd).Map()
		for _, k := range slices.Sorted(maps.Keys(obj)) { // a key written two ways: the same one kept every time
			item := obj[k]
			itemPath := path + "." + k
			key, m := protoValue(fd.MapKey(), nil, mapKeyJSON(fd.MapKey(), k), itemPath)
			if m != nil {
				return &mismatch{itemPath, "map key: " + m.reason}
			}
			val, m := protoValue(fd.MapValue(), mp.NewValue, item, itemPath)
			if m != nil {
				return m
			}
			mp.Set(key.MapKey(), val)
		}
	default:
		val, m := protoValue(fd, func() protoreflect.Value { return msg.NewField(fd) }, raw, path)
		if m != nil {
			return m
		}
		msg.Set(fd, val)
	}
	return nil
}

// mapKeyJSON turns a JSON object key into the JSON value of a map key of kind fd: keys are
// strings in JSON, so a numeric key is read as a number and a boolean as a boolean.
func mapKeyJSON(fd protoreflect.FieldDescriptor, k string) any {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return k
	case protoreflect.BoolKind:
		if b, err := strconv.ParseBool(k); err == nil {
			return b
		}
		return k
	default:
		return json.Number(k)
	}
}

// protoValue converts one JSON value to a field value of fd's kind; newMessage makes the value of
// a message field.
func protoValue(fd protoreflect.FieldDescriptor, newMessage func() protoreflect.Value, v any, path string) (protoreflect.Value, *mismatch) {
	switch kind := fd.Kind(); kind {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		val := newMessage()
		return val, toProto(val.Message(), v, path)
	case protoreflect.BoolKind:
		b, ok := v.(bool)
		if !ok {
			return protoreflect.Value{}, &mismatch{path, "want a boolean, got " + jsonKind(v)}
		}
		return protoreflect.ValueOfBool(b), nil
	case protoreflect.StringKind:
		s, ok := v.(string)
		if !ok {
			return protoreflect.Value{}, &mismatch{path, "want a string, got " + jsonKind(v)}
		}
		return protoreflect.ValueOfString(s), nil
	case protoreflect.BytesKind:
		s, ok := v.(string)
		if !ok {
			return protoreflect.Value{}, &mismatch{path, "want a base64 string (bytes), got " + jsonKind(v)}
		}
		b, err := decodeBase64(s)
		if err != nil {
			return protoreflect.Value{}, &mismatch{path, "not base64 (bytes): " + err.Error()}
		}
		return protoreflect.ValueOfBytes(b), nil
	case protoreflect.EnumKind:
		return enumValue(fd.Enum(), v, path)
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		return floatValue(kind, v, path)
	default:
		return integerValue(kind, v, path)
	}
}

func decodeBase64(s string) ([]byte, error) {
	enc := base64.StdEncoding
	if strings.ContainsAny(s, "-_") {
		enc = base64.URLEncoding
	}
	if len(s)%4 != 0 {
		enc = enc.WithPadding(base64.NoPadding)
	}
	return enc.DecodeString(s)
}

func enumValue(ed protoreflect.EnumDescriptor, v any, path string) (protoreflect.Value, *mismatch) {
	switch v := v.(type) {
	case string:
		if ev := ed.Values().ByName(protoreflect.Name(v)); ev != nil {
			return protoreflect.ValueOfEnum(ev.Number()), nil
		}
		return protoreflect.Value{}, &mismatch{path, fmt.Sprintf("%q is not a value of enum %s", v, ed.FullName())}
	case json.Number:
		n, err := strconv.ParseInt(v.String(), 10, 32)
		if err != nil {
			return protoreflect.Value{}, &mismatch{path, fmt.Sprintf("%s is not an enum number (a 32-bit integer)", v)}
		}
		if ed.IsClosed() && ed.Values().ByNumber(protoreflect.EnumNumber(n)) == nil {
			return protoreflect.Value{}, &mismatch{path, fmt.Sprintf("%d is not a value of closed enum %s", n, ed.FullName())}
		}
		return protoreflect.ValueOfEnum(protoreflect.EnumNumber(n)), nil
	}
	return protoreflect.Value{}, &mismatch{path, fmt.Sprintf("want an enum name or number (enum %s), got %s", ed.FullName(), jsonKind(v))}
}

func floatValue(kind protoreflect.Kind, v any, path string) (protoreflect.Value, *mismatch) {
	var f float64
	switch v := v.(type) {
	case json.Number:
		parsed, err := strconv.ParseFloat(v.String(), 64)
		if err != nil {
			return protoreflect.Value{}, &mismatch{path, fmt.Sprintf("%s is not a %s", v, kind)}
		}
		f = parsed
	case string:
		switch v {
		case "NaN":
			f = math.NaN()
		case "Infinity":
			f = math.Inf(1)
		case "-Infinity":
			f = math.Inf(-1)
		default:
			parsed, err := strconv.ParseFloat(v, 64)
			if err != nil || strings.TrimSpace(v) != v {
				return protoreflect.Value{}, &mismatch{path, fmt.Sprintf("%q is not a %s", v, kind)}
			}
			f = parsed
		}
	default:
		return protoreflect.Value{}, &mismatch{path, "want a number, got " + jsonKind(v)}
	}
	if kind == protoreflect.FloatKind {
		if !math.IsInf(f, 0) && !math.IsNaN(f) && math.Abs(f) > math.MaxFloat32 {
			return protoreflect.Value{}, &mismatch{path, fmt.Sprintf("%v is out of the range of a float (32 bits)", f)}
		}
		return protoreflect.ValueOfFloat32(float32(f)), nil
	}
	return protoreflect.ValueOfFloat64(f), nil
}

// integerValue reads a JSON number or a string holding one (the JSON mapping of 64-bit integers)
// as an integer of kind, in range.
func integerValue(kind protoreflect.Kind, v any, path string) (protoreflect.Value, *mismatch) {
	var text string
	switch v := v.(type) {
	case json.Number:
		text = v.String()
	case string:
		text = v
	default:
		return protoreflect.Value{}, &mismatch{path, "want an integer, got " + jsonKind(v)}
	}
	bits, signed := 64, true
	switch kind {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		bits = 32
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		bits, signed = 32, false
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		signed = false
	}
	if signed {
		n, err := strconv.ParseInt(text, 10, bits)
		if err != nil {
			return protoreflect.Value{}, &mismatch{path, fmt.Sprintf("%s is not an %s (an integer in range)", text, kind)}
		}
		if bits == 32 {
			return protoreflect.ValueOfInt32(int32(n)), nil
		}
		return protoreflect.ValueOfInt64(n), nil
	}
	n, err := strconv.ParseUint(text, 10, bits)
	if err != nil {
		return protoreflect.Value{}, &mismatch{path, fmt.Sprintf("%s is not a %s (an integer in range)", text, kind)}
	}
	if bits == 32 {
		return protoreflect.ValueOfUint32(uint32(n)), nil
	}
	return protoreflect.ValueOfUint64(n), nil
}

// protojsonPosition is the position protojson puts in its errors, "(line 1:1): ".
var protojsonPosition = regexp.MustCompile(`^\(line \d+:\d+\):`)

// wellKnown reports the google.protobuf types whose JSON form is their own (protojson reads them).
func wellKnown(md protoreflect.MessageDescriptor) bool {
	name := md.FullName()
	if name.Parent() != "google.protobuf" {
		return false
	}
	switch name.Name() {
	case "Any", "Timestamp", "Duration", "FieldMask", "Struct", "Value", "ListValue",
		"DoubleValue", "FloatValue", "Int64Value", "UInt64Value", "Int32Value", "UInt32Value",
		"BoolValue", "StringValue", "BytesValue":
		return true
	}
	return false
}

func wellKnownToProto(msg protoreflect.Message, v any, path string) *mismatch {
	raw, err := json.Marshal(v)
	if err != nil {
		return &mismatch{path, err.Error()}
	}
	if err := protojson.Unmarshal(raw, msg.Interface()); err != nil {
		// protojson's reason without its prefix and its position in the re-encoded value, which
		// the path replaces (protojson puts a space or, at random, a no-break space after them).
		reason := strings.TrimLeftFunc(strings.TrimPrefix(err.Error(), "proto:"), unicode.IsSpace)
		reason = strings.TrimLeftFunc(protojsonPosition.ReplaceAllString(reason, ""), unicode.IsSpace)
		return &mismatch{path, fmt.Sprintf("not a %s: %s", msg.Descriptor().FullName(), reason)}
	}
	return nil
}
