package schema

import (
	"context"
	"encoding/binary"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
)

const durationSchema = `{"type":"record","name":"Lease","namespace":"outboxkit.test","fields":[
 {"name":"term","type":{"type":"fixed","name":"Term","size":12,"logicalType":"duration"}},
 {"name":"grace","type":["null","Term"],"default":null}
]}`

// The Avro duration (a fixed of 12 bytes: months, days, milliseconds as little-endian unsigned
// 32-bit integers) takes an object or an ISO 8601 string, is written as the specification says,
// and decodes back to the object, through the real registry; bad values are permanent
// mismatches naming the path.
func TestAvroDurationRoundTrip(t *testing.T) {
	cl, _, topic, _ := registry(t)
	topic += "_duration"
	registerAs(t, cl, Subject(topic), sr.TypeAvro, durationSchema)
	enc, dec := codecs(t, cl)
	ctx := context.Background()
	for _, tc := range []struct {
		payload              string
		months, days, millis uint32
		want                 string
	}{
		{`{"term":{"months":14,"days":3,"milliseconds":14706789}}`, 14, 3, 14706789,
			`{"term":{"months":14,"days":3,"milliseconds":14706789},"grace":null}`},
		{`{"term":"P1Y2M3DT4H5M6.789S","grace":"P2W"}`, 14, 3, 14706789,
			`{"term":{"months":14,"days":3,"milliseconds":14706789},"grace":{"months":0,"days":14,"milliseconds":0}}`},
		{`{"term":{"days":1}}`, 0, 1, 0, `{"term":{"months":0,"days":1,"milliseconds":0},"grace":null}`},
		{`{"term":{"months":4294967295,"days":4294967295,"milliseconds":4294967295}}`, 1<<32 - 1, 1<<32 - 1, 1<<32 - 1,
			`{"term":{"months":4294967295,"days":4294967295,"milliseconds":4294967295},"grace":null}`},
	} {
		framed, err := enc.Encode(ctx, topic, []byte(tc.payload))
		if err != nil {
			t.Fatalf("%s: %v", tc.payload, err)
		}
		var h sr.ConfluentHeader
		_, body, err := h.DecodeID(framed)
		if err != nil || len(body) < 12 {
			t.Fatalf("%s: body % x (%v)", tc.payload, body, err)
		}
		if m, d, ms := binary.LittleEndian.Uint32(body), binary.LittleEndian.Uint32(body[4:]), binary.LittleEndian.Uint32(body[8:]); m != tc.months || d != tc.days || ms != tc.millis {
			t.Errorf("%s: wrote months %d days %d millis %d, want %d %d %d", tc.payload, m, d, ms, tc.months, tc.days, tc.millis)
		}
		out, err := dec.Decode(ctx, framed)
		if err != nil {
			t.Fatalf("%s: decode: %v", tc.payload, err)
		}
		if got, want := decodeNumbers(t, string(out)), decodeNumbers(t, tc.want); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: decoded %s, want %s", tc.payload, out, tc.want)
		}
	}
	checkMismatches(t, enc, topic, []mismatchCase{
		{`{"term":{"months":-1}}`, "$.term.months", "want an integer from 0 to 4294967295, got a number"},
		{`{"term":{"months":4294967296}}`, "$.term.months", "want an integer from 0 to 4294967295, got a number"},
		{`{"term":{"days":"2"}}`, "$.term.days", "want an integer from 0 to 4294967295, got a string"},
		{`{"term":{"weeks":2}}`, "$.term.weeks", "not a member of a duration (months, days, milliseconds)"},
		{`{"term":"P"}`, "$.term", `"P" is not an ISO 8601 duration of years, months, weeks, days, hours, minutes and seconds (P1Y2M3DT4H5M6.789S)`},
		{`{"term":"P1DT"}`, "$.term", `"P1DT" is not an ISO 8601 duration of years, months, weeks, days, hours, minutes and seconds (P1Y2M3DT4H5M6.789S)`},
		{`{"term":"-P1D"}`, "$.term", `"-P1D" is not an ISO 8601 duration of years, months, weeks, days, hours, minutes and seconds (P1Y2M3DT4H5M6.789S)`},
		{`{"term":"PT1194H"}`, "$.term", `"PT1194H": 4298400000 milliseconds do not fit a duration (at most 4294967295)`},
		{`{"term":12}`, "$.term", "want an object {months, days, milliseconds} or an ISO 8601 duration string (duration), got a number"},
	})
}
