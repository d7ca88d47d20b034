package schema

import (
	"encoding/json"
	"fmt"
	"math/big"
	"reflect"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/hamba/avro/v2"
)

// Layouts of the JSON strings the logical types take.
const (
	dateLayout           = "2006-01-02"
	timeOfDayLayout      = "15:04:05.999999"
	localTimestampLayout = "2006-01-02T15:04:05.999999999"
)

// logicalToAvro converts the JSON value of a logical type to what hamba/avro encodes: a date as
// "2026-12-07" or its day number, a time of day as "10:30:00.5" or its millis/micros, a
// timestamp as an RFC 3339 string (a local timestamp without its zone) or its epoch
// millis/micros, a uuid as its string, a decimal as a JSON number or a string of one, at most its
// scale's decimal places and its precision's digits.
func logicalToAvro(s *avro.PrimitiveSchema, v any, path string) (any, *mismatch) {
	logical := s.Logical().Type()
	if n, ok := v.(json.Number); ok && logical != avro.Decimal {
		return integerToAvro(s.Type(), n, path) // the underlying int or long itself
	}
	str, isString := v.(string)
	if !isString && logical != avro.Decimal {
		return nil, &mismatch{path, fmt.Sprintf("want a string or an integer (%s), got %s", logical, jsonKind(v))}
	}
	switch logical {
	case avro.Date:
		t, err := time.Parse(dateLayout, str)
		if err != nil {
			return nil, &mismatch{path, fmt.Sprintf("%q is not a date (want 2006-01-02)", str)}
		}
		return int32(t.Unix() / 86400), nil
	case avro.TimeMillis, avro.TimeMicros:
		t, err := time.Parse(timeOfDayLayout, str)
		if err != nil {
			return nil, &mismatch{path, fmt.Sprintf("%q is not a time of day (want 15:04:05 or 15:04:05.999999)", str)}
		}
		d := t.Sub(time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC))
		if logical == avro.TimeMillis {
			return int32(d.Milliseconds()), nil
		}
		return d.Microseconds(), nil
	case avro.TimestampMillis, avro.TimestampMicros, avro.LocalTimestampMillis, avro.LocalTimestampMicros:
		layout := time.RFC3339Nano
		if logical == avro.LocalTimestampMillis || logical == avro.LocalTimestampMicros {
			layout = localTimestampLayout
		}
		t, err := time.Parse(layout, str)
		if err != nil {
			return nil, &mismatch{path, fmt.Sprintf("%q is not a %s (want %s)", str, logical, layout)}
		}
		if logical == avro.TimestampMillis || logical == avro.LocalTimestampMillis {
			return t.UnixMilli(), nil
		}
		return t.UnixMicro(), nil
	case avro.UUID:
		if _, err := uuid.Parse(str); err != nil {
			return nil, &mismatch{path, fmt.Sprintf("%q is not a UUID", str)}
		}
		return str, nil
	case avro.Decimal:
		return decimalToAvro(s.Logical().(*avro.DecimalLogicalSchema), v, path)
	}
	return nil, &mismatch{path, "logical type " + string(logical) + " is not supported yet"}
}

func decimalToAvro(d *avro.DecimalLogicalSchema, v any, path string) (any, *mismatch) {
	var text string
	switch v := v.(type) {
	case json.Number:
		text = v.String()
	case string:
		text = v
	default:
		return nil, &mismatch{path, "want a number or a string of one (decimal), got " + jsonKind(v)}
	}
	r, ok := new(big.Rat).SetString(text)
	if !ok || strings.ContainsAny(text, "/") {
		return nil, &mismatch{path, fmt.Sprintf("%q is not a decimal number", text)}
	}
	scaled := new(big.Rat).Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(d.Scale())), nil)))
	if !scaled.IsInt() {
		return nil, &mismatch{path, fmt.Sprintf("%s has more than %d decimal places (the scale)", text, d.Scale())}
	}
	if digits := len(strings.TrimPrefix(scaled.Num().String(), "-")); digits > d.Precision() {
		return nil, &mismatch{path, fmt.Sprintf("%s has more than %d digits (the precision)", text, d.Precision())}
	}
	return r, nil
}

// fixedToAvro converts a JSON string of exactly the fixed's size in bytes (the convention of
// bytes: the string's bytes) to the [size]byte hamba/avro encodes, and a fixed decimal as a
// decimal, a fixed duration as durationToAvro reads it.
func fixedToAvro(s *avro.FixedSchema, v any, path string) (any, *mismatch) {
	if l := s.Logical(); l != nil {
		if d, ok := l.(*avro.DecimalLogicalSchema); ok {
			return decimalToAvro(d, v, path)
		}
		if l.Type() == avro.Duration {
			return durationToAvro(v, path)
		}
		return nil, &mismatch{path, "logical type " + string(l.Type()) + " on fixed " + s.FullName() + " is not supported yet"}
	}
	str, ok := v.(string)
	if !ok {
		return nil, &mismatch{path, "want a string (fixed " + s.FullName() + "), got " + jsonKind(v)}
	}
	if len(str) != s.Size() {
		return nil, &mismatch{path, fmt.Sprintf("%d bytes, fixed %s has %d", len(str), s.FullName(), s.Size())}
	}
	arr := reflect.New(reflect.ArrayOf(s.Size(), reflect.TypeFor[byte]())).Elem()
	reflect.Copy(arr, reflect.ValueOf([]byte(str)))
	return arr.Interface(), nil
}

// fixedFromAvro turns the [size]byte hamba/avro decodes for a fixed into its string.
func fixedFromAvro(v any) any {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Array || rv.Type().Elem().Kind() != reflect.Uint8 {
		return v
	}
	b := make([]byte, rv.Len())
	reflect.Copy(reflect.ValueOf(b), rv)
	return string(b)
}

// logicalValue reports a value hamba/avro decodes for a logical type (and for no plain type).
func logicalValue(v any) bool {
	switch v.(type) {
	case time.Time, time.Duration, *big.Rat:
		return true
	}
	return false
}

// logicalFromAvro turns what hamba/avro decodes for a logical type into the JSON logicalToAvro
// reads: dates, times of day and timestamps as strings, a decimal as a number with its scale's
// decimal places.
func logicalFromAvro(s *avro.PrimitiveSchema, v any) any {
	switch x := v.(type) {
	case time.Time:
		switch s.Logical().Type() {
		case avro.Date:
			return x.UTC().Format(dateLayout)
		case avro.LocalTimestampMillis, avro.LocalTimestampMicros:
			return x.Format(localTimestampLayout)
		default:
			return x.UTC().Format(time.RFC3339Nano)
		}
	case time.Duration:
		return time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC).Add(x).Format(timeOfDayLayout)
	case *big.Rat:
		if d, ok := s.Logical().(*avro.DecimalLogicalSchema); ok {
			return json.Number(x.FloatString(d.Scale()))
		}
	}
	return v
}
