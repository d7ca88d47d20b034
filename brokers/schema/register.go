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
// references nothing, they are given exactly when some topic may register, a topic that may
// register has its subject's schema where the subject is known without the event, and no
// subject that may be registered is read at a fixed version other than 1 (the relay registers
// version 1 of a missing subject, so a later version would be registered and then refused).
func validateRegistration(c Config) error {
	mayRegister := c.Register
	for _, tc := range c.Topics {
		if tc.Register != nil && *tc.Register {
			mayRegister = true
		}
	}
	switch {
	case mayRegister && len(c.Schemas) == 0:
		return errors.New("register: on, but no schemas are given to register")
	case !mayRegister && len(c.Schemas) > 0:
		return fmt.Errorf("schemas: given for %q, but register is off (by default and for every topic)", slices.Sorted(maps.Keys(c.Schemas)))
	}
	if c.Register && c.Version > 1 {
		return fmt.Errorf("version: %d %s", c.Version, registersVersion1)
	}
	for _, topic := range slices.Sorted(maps.Keys(c.Topics)) {
		if err := c.validateTopicRegistration(topic); err != nil {
			return fmt.Errorf("topics.%s.%w", topic, err)
		}
	}
	for _, subject := range slices.Sorted(maps.Keys(c.Schemas)) {
		s := c.Schemas[subject]
		if len(s.References) > 0 {
			return fmt.Errorf("schemas.%s: has references; the relay registers self-contained schemas only", subject)
		}
		if _, err := compile(context.Background(), s.Type, s.Schema, nil); err != nil {
			return fmt.Errorf("schemas.%s: schema %w", subject, err)
		}
	}
	return nil
}

// registersVersion1 completes the error of a fixed version above 1 with register on.
const registersVersion1 = "with register on: the relay registers version 1 of a missing subject; use version 0 (latest) or 1"

// validateTopicRegistration checks the entry of topic when it may register: its version is the
// latest or 1, and its subject, where known without the event (given outright or named by the
// topic strategy), has a schema in Schemas.
func (c Config) validateTopicRegistration(topic string) error {
	tc := c.Topics[topic]
	if tc.Register != nil && !*tc.Register || tc.Register == nil && !c.Register {
		return nil
	}
	if tc.Version > 1 {
		return fmt.Errorf("version: %d %s", tc.Version, registersVersion1)
	}
	subject := tc.Subject
	if subject == "" {
		strategy := c.Strategy
		if tc.Strategy != "" {
			strategy = tc.Strategy
		}
		if strategy != "" && strategy != StrategyTopic {
			return nil // named by each event's type
		}
		subject = Subject(topic)
	}
	if _, ok := c.Schemas[subject]; !ok {
		return fmt.Errorf("register: on, but schemas has no %q (the topic's subject) to register", subject)
	}
	return nil
}

// registerMissing registers the configured schema of t's subject when t may register, reads the
// latest version or version 1, the lookup failed because the subject has no such version, and
// the subject has no version at all (a subject with versions is never given another one).
// Otherwise it returns lookupErr. Whether or not the registration succeeds, it then looks the
// subject up again: another relay, or another worker of this one, may have registered it first,
// and the registry refuses the second registration (Apicurio answers 409 "already exists"); the
// subject is then there and used as if the first lookup had found it.
func (e *Encoder) registerMissing(ctx context.Context, t target, lookupErr error) (sr.SubjectSchema, error) {
	s, ok := e.config.Schemas[t.subject]
	if !t.register || !ok || t.version > 1 || !notFound(lookupErr) {
		return sr.SubjectSchema{}, lookupErr
	}
	version := -1 // latest, in pkg/sr
	if t.version == 1 {
		versions, err := e.client.SubjectVersions(ctx, t.subject)
		if err == nil && len(versions) > 0 {
			return sr.SubjectSchema{}, lookupErr
		}
		if err != nil && !notFound(err) {
			return sr.SubjectSchema{}, err
		}
		version = 1
	}
	// RegisterSchema, not CreateSchema: CreateSchema's second request (the schema's usages by
	// id) could fail after the registration succeeded; the lookup below covers both cases.
	_, registerErr := e.client.RegisterSchema(ctx, t.subject, s, -1, -1)
	ss, err := e.client.SchemaByVersion(ctx, t.subject, version)
	switch {
	case err == nil:
		return ss, nil
	case registerErr != nil:
		return sr.SubjectSchema{}, fmt.Errorf("registering the configured schema: %w", registerErr)
	default:
		return sr.SubjectSchema{}, fmt.Errorf("looking up the configured schema after registering it: %w", err)
	}
}

// notFound reports the registry's answer that a subject or version does not exist (Confluent's
// 40401, or 40402 which Apicurio answers for a subject without versions).
func notFound(err error) bool {
	var re *sr.ResponseError
	return errors.As(err, &re) && (re.ErrorCode == sr.ErrSubjectNotFound.Code || re.ErrorCode == sr.ErrVersionNotFound.Code)
}
