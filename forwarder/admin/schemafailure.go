package admin

import (
	"regexp"
	"strconv"
)

// SchemaFailure is what a failure group of events that do not fit their schema (the relay's
// schema encoding, brokers/schema) names: the subject and version that refused them, and where
// in the payload and why, with the values normalised (an array index is <n>). A schema change
// that makes pending events invalid shows up as one such group per subject version, field path
// and reason.
type SchemaFailure struct {
	Subject string
	Version int
	// Path is the JSON path of the field that does not fit, such as $.items[<n>].qty.
	Path string
	// Reason is what is wrong there, such as "want an integer, got a string".
	Reason string
}

// schemaMismatch reads a normalised brokers/schema.MismatchError text.
var schemaMismatch = regexp.MustCompile(`payload does not fit the schema of subject "([^"]*)" version (\d+)(?: \(schema id <n>\))? at (\S+): (.*)$`)

// SchemaFailureOf returns the schema failure a normalised error text (NormaliseError) names, or
// nil when the text is not that of an event that does not fit its schema's version.
func SchemaFailureOf(normalised string) *SchemaFailure {
	m := schemaMismatch.FindStringSubmatch(normalised)
	if m == nil {
		return nil
	}
	version, err := strconv.Atoi(m[2])
	if err != nil {
		return nil
	}
	return &SchemaFailure{Subject: m[1], Version: version, Path: m[3], Reason: m[4]}
}
