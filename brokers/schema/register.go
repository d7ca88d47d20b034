package schema

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"

	"github.com/twmb/franz-go/pkg/sr"
)

// SchemaSource is a schema the relay may register for a subject (YAML
// schema_registry.schemas.<subject>): its type and its text, inline or in a file.
type SchemaSource struct {
	// Type is AVRO (the default, as in the registry's API), PROTOBUF or JSON.
	Type string `yaml:"type"`
	// Schema is the schema's text (an Avro definition, a .proto file, a JSON Schema); it
	// excludes File.
	Schema string `yaml:"schema"`
	// File is a file holding the schema's text; it excludes Schema.
	File string `yaml:"file"`
}

// load returns the registry's form of s, reading its file.
func (s SchemaSource) load() (sr.Schema, error) {
	var typ sr.SchemaType
	if err := typ.UnmarshalText([]byte(s.Type)); err != nil {
		return sr.Schema{}, fmt.Errorf("type: %q: want AVRO, PROTOBUF or JSON", s.Type)
	}
	text := s.Schema
	switch {
	case s.Schema != "" && s.File != "":
		return sr.Schema{}, fmt.Errorf("schema and file %q: set one", s.File)
	case s.File != "":
		b, err := os.ReadFile(s.File)
		if err != nil {
			return sr.Schema{}, fmt.Errorf("file: %w", err)
		}
		text = string(b)
	case s.Schema == "":
		return sr.Schema{}, errors.New("schema or file: set one")
	}
	return sr.Schema{Schema: text, Type: typ}, nil
}

// loadSchemas returns the registry's form of sources, by subject.
func loadSchemas(sources map[string]SchemaSource) (map[string]sr.Schema, error) {
	if len(sources) == 0 {
		return nil, nil
	}
	out := make(map[string]sr.Schema, len(sources))
	for _, subject := range slices.Sorted(maps.Keys(sources)) {
		s, err := sources[subject].load()
		if err != nil {
			return nil, fmt.Errorf("schemas.%s.%w", subject, err)
		}
		out[subject] = s
	}
	return out, nil
}

// validateRegistration checks the schemas the relay may register: each parses as its type and
// references nothing, and they are given exactly when some topic may register.
func validateRegistration(register bool, topics map[string]TopicConfig, schemas map[string]sr.Schema) error {
	mayRegister := register
	for _, tc := range topics {
		if tc.Register != nil && *tc.Register {
			mayRegister = true
		}
	}
	switch {
	case mayRegister && len(schemas) == 0:
		return errors.New("register: on, but no schemas are given to register")
	case !mayRegister && len(schemas) > 0:
		return fmt.Errorf("schemas: given for %q, but register is off (by default and for every topic)", slices.Sorted(maps.Keys(schemas)))
	}
	for _, subject := range slices.Sorted(maps.Keys(schemas)) {
		s := schemas[subject]
		if len(s.References) > 0 {
			return fmt.Errorf("schemas.%s: has references; the relay registers self-contained schemas only", subject)
		}
		if _, err := compile(context.Background(), s.Type, s.Schema, nil); err != nil {
			return fmt.Errorf("schemas.%s: schema %w", subject, err)
		}
	}
	return nil
}

// registerMissing registers the configured schema of t's subject when t may register, the
// lookup failed because the subject has no such version, and the subject has no version at all
// (a subject with versions is never given another one). Otherwise it returns lookupErr.
func (e *Encoder) registerMissing(ctx context.Context, t target, lookupErr error) (sr.SubjectSchema, error) {
	s, ok := e.config.Schemas[t.subject]
	if !t.register || !ok || !notFound(lookupErr) {
		return sr.SubjectSchema{}, lookupErr
	}
	if t.version != 0 {
		versions, err := e.client.SubjectVersions(ctx, t.subject)
		if err == nil && len(versions) > 0 {
			return sr.SubjectSchema{}, lookupErr
		}
		if err != nil && !notFound(err) {
			return sr.SubjectSchema{}, err
		}
	}
	ss, err := e.client.CreateSchema(ctx, t.subject, s)
	if err != nil {
		return sr.SubjectSchema{}, fmt.Errorf("registering the configured schema: %w", err)
	}
	if t.version != 0 && ss.Version != t.version {
		return sr.SubjectSchema{}, fmt.Errorf("registered the configured schema as version %d, but version %d is configured", ss.Version, t.version)
	}
	return ss, nil
}

// notFound reports the registry's answer that a subject or version does not exist (Confluent's
// 40401, or 40402 which Apicurio answers for a subject without versions).
func notFound(err error) bool {
	var re *sr.ResponseError
	return errors.As(err, &re) && (re.ErrorCode == sr.ErrSubjectNotFound.Code || re.ErrorCode == sr.ErrVersionNotFound.Code)
}
