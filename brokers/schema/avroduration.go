package schema

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"

	"github.com/hamba/avro/v2"
)

// isoDuration is the ISO 8601 duration Avro's duration can hold: years and months (months),
// weeks and days (days), hours, minutes and seconds to the millisecond (milliseconds).
var isoDuration = regexp.MustCompile(`^P(?:(\d{1,10})Y)?(?:(\d{1,10})M)?(?:(\d{1,10})W)?(?:(\d{1,10})D)?(?:T(?:(\d{1,10})H)?(?:(\d{1,10})M)?(?:(\d{1,10})(?:\.(\d{1,3}))?S)?)?$`)

// durationToAvro converts the JSON of an Avro duration (a fixed of 12 bytes: months, days and
// milliseconds, each an unsigned 32-bit integer) to the avro.LogicalDuration hamba/avro encodes:
// an object {"months": 1, "days": 2, "milliseconds": 3} (members missing are 0) or an ISO 8601
// duration string such as "P1Y2M3DT4H5M6.789S".
func durationToAvro(v any, path string) (any, *mismatch) {
	switch v := v.(type) {
	case map[string]any:
		var d avro.LogicalDuration
		for _, k := range slices.Sorted(maps.Keys(v)) {
			var dst *uint32
			switch k {
			case "months":
				dst = &d.Months
			case "days":
				dst = &d.Days
			case "milliseconds":
				dst = &d.Milliseconds
			default:
				return nil, &mismatch{path + "." + k, "not a member of a duration (months, days, milliseconds)"}
			}
			n, ok := v[k].(json.Number)
			u, err := strconv.ParseUint(string(n), 10, 32)
			if !ok || err != nil {
				return nil, &mismatch{path + "." + k, fmt.Sprintf("want an integer from 0 to %d, got %s", uint32(math.MaxUint32), jsonKind(v[k]))}
			}
			*dst = uint32(u)
		}
		return d, nil
	case string:
		return isoToDuration(v, path)
	}
	return nil, &mismatch{path, "want an object {months, days, milliseconds} or an ISO 8601 duration string (duration), got " + jsonKind(v)}
}

// isoToDuration reads an ISO 8601 duration string into months, days and milliseconds.
func isoToDuration(s, path string) (any, *mismatch) {
	m := isoDuration.FindStringSubmatch(s)
	if m == nil || s == "P" || s[len(s)-1] == 'T' {
		return nil, &mismatch{path, fmt.Sprintf("%q is not an ISO 8601 duration of years, months, weeks, days, hours, minutes and seconds (P1Y2M3DT4H5M6.789S)", s)}
	}
	n := func(i int) uint64 {
		u, _ := strconv.ParseUint(m[i], 10, 64) // "" is 0; at most 10 digits, so no sum below overflows
		return u
	}
	frac := m[8]
	for len(frac) < 3 {
		frac += "0"
	}
	ms, _ := strconv.ParseUint(frac, 10, 64)
	months := n(1)*12 + n(2)
	days := n(3)*7 + n(4)
	millis := ((n(5)*60+n(6))*60+n(7))*1000 + ms
	for _, c := range []struct {
		name string
		v    uint64
	}{{"months", months}, {"days", days}, {"milliseconds", millis}} {
		if c.v > math.MaxUint32 {
			return nil, &mismatch{path, fmt.Sprintf("%q: %d %s do not fit a duration (at most %d)", s, c.v, c.name, uint32(math.MaxUint32))}
		}
	}
	return avro.LogicalDuration{Months: uint32(months), Days: uint32(days), Milliseconds: uint32(millis)}, nil
}

// durationFromAvro turns a decoded duration into the object durationToAvro reads.
func durationFromAvro(d avro.LogicalDuration) any {
	return map[string]any{
		"months":       json.Number(strconv.FormatUint(uint64(d.Months), 10)),
		"days":         json.Number(strconv.FormatUint(uint64(d.Days), 10)),
		"milliseconds": json.Number(strconv.FormatUint(uint64(d.Milliseconds), 10)),
	}
}
