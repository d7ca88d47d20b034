package schema

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"
)

// variousSchema has what the test schemas elsewhere do not: a union of several named branches, a
// recursive record, floats, bytes, defaults of each kind, nested maps and arrays.
const variousSchema = `{"type":"record","name":"Various","namespace":"outboxkit.test","fields":[
 {"name":"f","type":"float"},
 {"name":"b","type":"bytes","default":"\u00ff"},
 {"name":"choice","type":["null","int","string",{"type":"record","name":"Pt","fields":[{"name":"x","type":"long"}]},
   {"type":"enum","name":"Colour","symbols":["RED","GREEN"]},{"type":"array","items":"Pt"}],"default":null},
 {"name":"next","type":["null","Various"],"default":null},
 {"name":"grid","type":{"type":"array","items":{"type":"array","items":"int"}},"default":[[1,2]]},
 {"name":"named","type":{"type":"map","values":{"type":"map","values":"Pt"}},"default":{}},
 {"name":"colour","type":"Colour","default":"GREEN"},
 {"name":"pt","type":"Pt","default":{"x":7}},
 {"name":"n","type":"long","default":42},
 {"name":"empty","type":"null","default":null}
]}`

// directCases are payloads per schema: the generic path encodes each, and the direct path must
// encode them itself (they are the common shapes), to the same bytes.
var directCases = map[string][]string{
	orderSchema: {
		`{"id":"o-1","amount":9007199254740993,"qty":3,"price":12.5,"paid":true,"status":"SHIPPED","note":"fragile","items":[{"sku":"a","qty":1},{"sku":"b","qty":2}],"attrs":{"weight":7}}`,
		`{"id":"o","amount":-1,"qty":-2147483648,"price":-0.0,"paid":false,"status":"NEW","items":[]}`,
		` { "items" : [ ] , "status":"NEW","paid":false,"price":1e3,"qty":0,"amount":0,"id":"\u00e9t\u00e9 \"quoted\"" , "tags":["x"]} `,
		`{"id":"ünïcode ✓","amount":1,"qty":1,"price":1,"paid":false,"status":"NEW","items":[],"note":null,"attrs":{"a":1,"b":-2,"\u0063":3}}`,
	},
	logicalSchema: {
		`{"day":"2026-12-07","at":"2026-12-07T10:00:00.123Z","at_us":"2026-12-07T11:00:00.000001+01:00","local":"2026-12-07T10:00:00",
		  "opens":"08:30:00.5","id":"0b8f1f5e-8a8e-4c39-9a34-3c5d3f0b8e2a","price":12.5,"maybe":"2026-12-07T10:00:00Z"}`,
		`{"day":0,"at":1796637600000,"at_us":0,"local":0,"opens":0,"id":"0b8f1f5e-8a8e-4c39-9a34-3c5d3f0b8e2a","price":"-9999999.99"}`,
	},
	fixedSchema: {`{"code":"ABCD","amount":-1234.5,"alt":"WXYZ"}`, `{"code":"ABCD","amount":0}`},
	variousSchema: {
		`{"f":1.5}`,
		`{"f":-3.25e2,"b":"raw\n","choice":5,"n":-9}`,
		`{"f":0,"choice":"five","next":{"f":2,"choice":{"x":3},"next":{"f":3,"choice":"RED"}}}`,
		`{"f":0,"choice":[{"x":1},{"x":2}],"grid":[[],[1],[2,3]],"named":{"a":{"p":{"x":1}},"b":{}},"colour":"RED","pt":{"x":-1}}`,
		`{"choice":2147483648,"f":1}`, // too big for the int branch; no long branch, so no fit below
		`{"f":1,"grid":[` + strings.Repeat("[1,2,3],", 250) + `[4]]}`,
		`{"f":1,"named":{` + strings.Repeat(`"k":{},`, 0) + manyKeys(150) + `}}`,
		`{"n":1,"f":2}`,
	},
}

func manyKeys(n int) string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = `"k` + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + string(rune('a'+i/26)) + `":{"q":{"x":1}}`
	}
	return strings.Join(keys, ",")
}

// TestAvroDirectMatchesTheGenericPath: for every test payload the direct encoder writes the
// bytes hamba/avro writes (decoded-equal where a map's entry order differs), and takes the
// common shapes itself.
func TestAvroDirectMatchesTheGenericPath(t *testing.T) {
	checked := 0
	for text, payloads := range directCases {
		c := mustAvroCodec(t, text)
		for _, p := range payloads {
			if strings.HasPrefix(p, `{"choice":2147483648`) {
				compareAvroPaths(t, c, []byte(p))
				continue
			}
			direct, ok := c.direct.encode([]byte(p))
			if !ok {
				t.Errorf("%.80s: the direct encoder left it to the generic path", p)
				continue
			}
			_, generic, m := c.encodeGeneric([]byte(p))
			if m != nil {
				t.Fatalf("%.80s: generic path: %s: %s", p, m.path, m.reason)
			}
			sameAvro(t, c.schema, p, direct, generic)
			if framed, ok := c.appendFramed(0x01020304, []byte(p), ""); !ok || !bytes.Equal(framed, append([]byte{0, 1, 2, 3, 4}, direct...)) {
				t.Errorf("%.80s: framed %x, want the header 0001020304 and %x", p, framed, direct)
			}
			checked++
		}
	}
	if checked < 15 {
		t.Fatalf("%d payloads compared, want at least 15", checked)
	}
}

// TestAvroDirectLeavesBadPayloadsToTheGenericPath: malformed JSON and payloads that do not fit
// get the generic path's error, word for word.
func TestAvroDirectLeavesBadPayloadsToTheGenericPath(t *testing.T) {
	c := mustAvroCodec(t, variousSchema)
	for _, p := range []string{
		``, ` `, `nul`, `{`, `{"f":1`, `{"f":1,}`, `{"f" 1}`, `{"f":01}`, `{"f":1.}`, `{"f":-}`, `{"f":1e}`,
		`{"f":"1"}`, `{"f":1,"b":"\x"}`, `{"f":1,"b":"\u12"}`, "{\"f\":1,\"b\":\"a\tb\"}", `{"f":1,"b":"` + "\xff" + `"}`,
		`{"f":1} x`, `{"f":1}}`, `[{"f":1}]`, `{"f":1,"f":2}`, `{"f":1,"zz":2}`, `{"f":1,"choice":true}`,
		`{"f":1,"choice":{"x":"1"}}`, `{"f":1,"colour":"BLUE"}`, `{"f":1,"n":1.5}`, `{"f":1,"n":9223372036854775808}`,
		`{"f":1,"named":{"a":{"p":{"x":1}},"a":{}}}`, `{"f":1,"grid":[[1,],[2]]}`, `{"f":1,"empty":0}`, `{"f":1e999}`,
		`{"f":1,"pt":{"x":1,"x":2}}`, `{"b":"x","f":true}`, `{"f":1,"choice":null,"next":{"f":"x"}}`,
	} {
		compareAvroPaths(t, c, []byte(p))
	}
}

// FuzzAvroDirect: whatever the payload, the codec returns what the generic path returns (the
// same bytes, or the same mismatch), so that the direct path changes nothing but the speed. It
// fuzzes each schema of directCases (which picks one), logical types, decimals and fixed too.
func FuzzAvroDirect(f *testing.F) {
	schemas := []string{variousSchema, logicalSchema, fixedSchema, orderSchema}
	codecs := make([]avroCodec, len(schemas))
	for i, text := range schemas {
		codecs[i] = mustAvroCodec(f, text)
		for _, p := range directCases[text] {
			f.Add(uint8(i), p)
		}
	}
	f.Add(uint8(0), `{"f":1,"choice":{"x":1},"named":{"a":{}}}`)
	f.Fuzz(func(t *testing.T, which uint8, p string) {
		compareAvroPaths(t, codecs[int(which)%len(codecs)], []byte(p))
	})
}

// compareAvroPaths checks that the codec's result for p equals the generic path's.
func compareAvroPaths(t *testing.T, c avroCodec, p []byte) {
	t.Helper()
	_, got, gotM := c.encode(p, "")
	_, want, wantM := c.encodeGeneric(p)
	switch {
	case (gotM == nil) != (wantM == nil):
		t.Errorf("%q: codec mismatch %v, generic %v", p, gotM, wantM)
	case gotM != nil && *gotM != *wantM:
		t.Errorf("%q: codec says %s: %s, generic %s: %s", p, gotM.path, gotM.reason, wantM.path, wantM.reason)
	case gotM == nil:
		sameAvro(t, c.schema, string(p), got, want)
	}
}

// sameAvro fails unless got and want are the same bytes, or, for a payload with a map of two
// entries or more, decode to the same value (the map's entries in another order).
func sameAvro(t *testing.T, s avro.Schema, payload string, got, want []byte) {
	t.Helper()
	if bytes.Equal(got, want) {
		return
	}
	var g, w any
	errG, errW := avro.Unmarshal(s, got, &g), avro.Unmarshal(s, want, &w)
	var value any
	reorders := json.Unmarshal([]byte(payload), &value) == nil && hasMap(s, value)
	if !reorders || errG != nil || errW != nil || !reflect.DeepEqual(g, w) {
		t.Errorf("%.80s:\n direct  %x (%v)\n generic %x (%v)\n decoded-equal accepted only with a map: %v", payload, got, errG, want, errW, reorders)
	}
}

// hasMap says whether value, the JSON of a payload of schema s, has a map of two entries or
// more, whose order an encoder may choose (any branch of a union that could hold it counts).
func hasMap(s avro.Schema, value any) bool {
	switch s := s.(type) {
	case *avro.RefSchema:
		return hasMap(s.Schema(), value)
	case *avro.MapSchema:
		m, _ := value.(map[string]any)
		if len(m) > 1 {
			return true
		}
		for _, v := range m {
			if hasMap(s.Values(), v) {
				return true
			}
		}
	case *avro.RecordSchema:
		m, _ := value.(map[string]any)
		for _, f := range s.Fields() {
			if v, ok := m[f.Name()]; ok && hasMap(f.Type(), v) {
				return true
			}
		}
	case *avro.ArraySchema:
		items, _ := value.([]any)
		for _, v := range items {
			if hasMap(s.Items(), v) {
				return true
			}
		}
	case *avro.UnionSchema:
		for _, branch := range s.Types() {
			if hasMap(branch, value) {
				return true
			}
		}
	}
	return false
}

func mustAvroCodec(t testing.TB, text string) avroCodec {
	t.Helper()
	c, err := newAvroCodec(text, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c.(avroCodec)
}
