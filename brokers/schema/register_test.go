package schema

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/outboxkit/outboxkit/internal/testsupport"
)

const pingSchema = `{"type":"record","name":"Ping","namespace":"outboxkit.test","fields":[{"name":"n","type":"long"}]}`

// versionsOf returns the versions the registry has of subject (none when it does not know it).
func versionsOf(t *testing.T, cl *sr.Client, subject string) []int {
	t.Helper()
	versions, err := cl.SubjectVersions(context.Background(), subject)
	if err != nil && !notFound(err) {
		t.Fatalf("versions of %s: %v", subject, err)
	}
	return versions
}

// With register on, a subject the registry has no version of is registered with the configured
// schema and the event is framed with its id; with it off (the default, or for one topic) the
// lookup fails as before and nothing is registered.
func TestEncoderRegistersTheConfiguredSchemaOfAMissingSubject(t *testing.T) {
	cl, _, _, _ := registry(t)
	ctx := context.Background()
	on, off, dflt := testsupport.UniqueName("reg_on"), testsupport.UniqueName("reg_off"), testsupport.UniqueName("reg_dflt")
	no := false
	schemas := map[string]sr.Schema{}
	for _, topic := range []string{on, off, dflt} {
		schemas[Subject(topic)] = sr.Schema{Schema: pingSchema, Type: sr.TypeAvro}
	}
	enc, err := NewEncoder(cl, Config{Register: true, Schemas: schemas, Topics: map[string]TopicConfig{off: {Register: &no}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{on, dflt} {
		out, err := enc.Encode(ctx, topic, []byte(`{"n":7}`))
		if err != nil {
			t.Fatalf("%s: %v", topic, err)
		}
		ss, err := cl.SchemaByVersion(ctx, Subject(topic), -1)
		if err != nil {
			t.Fatalf("%s was not registered: %v", topic, err)
		}
		var h sr.ConfluentHeader
		if id, _, err := h.DecodeID(out); err != nil || id != ss.ID || ss.Version != 1 {
			t.Errorf("%s: framed with id %d (%v), registered id %d version %d", topic, id, err, ss.ID, ss.Version)
		}
	}
	_, err = enc.Encode(ctx, off, []byte(`{"n":7}`))
	var re *RegistryError
	if !errors.As(err, &re) || !Retriable(err) || !notFound(err) {
		t.Errorf("topic with register off: %v, want the retriable not-found RegistryError", err)
	}
	if v := versionsOf(t, cl, Subject(off)); len(v) != 0 {
		t.Errorf("topic with register off: registered versions %v", v)
	}

	// Off by default.
	plain, err := NewEncoder(cl, Config{})
	if err != nil {
		t.Fatal(err)
	}
	missing := testsupport.UniqueName("reg_none")
	if _, err := plain.Encode(ctx, missing, []byte(`{"n":7}`)); !notFound(err) {
		t.Errorf("default config: %v, want the not-found RegistryError", err)
	}
	if v := versionsOf(t, cl, Subject(missing)); len(v) != 0 {
		t.Errorf("default config registered %v", v)
	}
}

// A subject that has versions is never given another: its latest, or its version 1, is used even
// when the configured schema differs; a fixed version above 1 with register on is refused
// before anything is registered (the relay would register version 1 and refuse it forever).
func TestEncoderNeverRegistersOverAnExistingSubject(t *testing.T) {
	cl, _, topic, id := registry(t) // orderSchema, version 1
	ctx := context.Background()
	for _, version := range []int{0, 1} {
		enc, err := NewEncoder(cl, Config{Version: version, Register: true, Schemas: map[string]sr.Schema{Subject(topic): {Schema: pingSchema}}})
		if err != nil {
			t.Fatal(err)
		}
		var mismatch *MismatchError
		if _, err := enc.Encode(ctx, topic, []byte(`{"n":7}`)); !errors.As(err, &mismatch) || mismatch.ID != id {
			t.Errorf("version %d: %v, want a mismatch against the registered order schema (id %d)", version, err, id)
		}
	}
	if v := versionsOf(t, cl, Subject(topic)); len(v) != 1 {
		t.Errorf("versions %v, want only the first", v)
	}
	missing := testsupport.UniqueName("reg_fixed")
	_, err := NewEncoder(cl, Config{Version: 2, Register: true, Schemas: map[string]sr.Schema{Subject(missing): {Schema: pingSchema, Type: sr.TypeAvro}}})
	if want := "schema: version: 2 with register on: "; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("version 2 with register: %v, want %q", err, want)
	}
	if v := versionsOf(t, cl, Subject(missing)); len(v) != 0 {
		t.Errorf("version 2 with register: registered %v", v)
	}
}

// Bad registration settings are refused, naming the value.
func TestRegistrationConfigErrorsNameTheValue(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.avsc")
	if err := os.WriteFile(bad, []byte(`{"type":"record","name":"X","fields":[{"name":"n","type":"lng"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	yes := true
	for _, tc := range []struct {
		c    RegistryConfig
		want string
	}{
		{RegistryConfig{Register: true}, "register: on, but no schemas are given to register"},
		{RegistryConfig{Topics: map[string]TopicConfig{"t": {Register: &yes}}}, "register: on, but no schemas are given to register"},
		{RegistryConfig{Schemas: map[string]SchemaSource{"s": {Schema: pingSchema}}}, `schemas: given for ["s"], but register is off (by default and for every topic)`},
		{RegistryConfig{Register: true, Schemas: map[string]SchemaSource{"s": {Type: "XML", Schema: "x"}}}, `schemas.s.type: "XML": want AVRO, PROTOBUF or JSON`},
		{RegistryConfig{Register: true, Schemas: map[string]SchemaSource{"s": {}}}, "schemas.s.schema or file: set one"},
		{RegistryConfig{Register: true, Schemas: map[string]SchemaSource{"s": {Schema: "x", File: bad}}}, `schemas.s.schema and file "` + bad + `": set one`},
		{RegistryConfig{Register: true, Schemas: map[string]SchemaSource{"s": {File: filepath.Join(dir, "none.avsc")}}}, "schemas.s.file: open " + filepath.Join(dir, "none.avsc") + ": no such file or directory"},
		{RegistryConfig{Register: true, Schemas: map[string]SchemaSource{"s": {File: bad}}}, "schemas.s: schema does not parse as AVRO: "},
		{RegistryConfig{Register: true, Schemas: map[string]SchemaSource{"s": {Type: "PROTOBUF", Schema: "syntax = \"proto3\"; message {"}}}, "schemas.s: schema does not parse as PROTOBUF: "},
		{RegistryConfig{Version: 2, Register: true, Schemas: map[string]SchemaSource{"s": {Schema: pingSchema}}},
			"version: 2 with register on: the relay registers version 1 of a missing subject; use version 0 (latest) or 1"},
		{RegistryConfig{Topics: map[string]TopicConfig{"t": {Version: 3, Register: &yes}}, Schemas: map[string]SchemaSource{"t-value": {Schema: pingSchema}}},
			"topics.t.version: 3 with register on: the relay registers version 1 of a missing subject; use version 0 (latest) or 1"},
		{RegistryConfig{Register: true, Topics: map[string]TopicConfig{"t": {Version: 3}}, Schemas: map[string]SchemaSource{"t-value": {Schema: pingSchema}}},
			"topics.t.version: 3 with register on: the relay registers version 1 of a missing subject; use version 0 (latest) or 1"},
		{RegistryConfig{Topics: map[string]TopicConfig{"refunds": {Register: &yes}}, Schemas: map[string]SchemaSource{"refund-value": {Schema: pingSchema}}},
			`topics.refunds.register: on, but schemas has no "refunds-value" (the topic's subject) to register`},
		{RegistryConfig{Register: true, Topics: map[string]TopicConfig{"refunds": {Subject: "shop.Refund"}}, Schemas: map[string]SchemaSource{"refunds-value": {Schema: pingSchema}}},
			`topics.refunds.register: on, but schemas has no "shop.Refund" (the topic's subject) to register`},
	} {
		tc.c.URL = "http://r"
		err := tc.c.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.c, err, tc.want)
		}
	}
	no := false
	for _, ok := range []RegistryConfig{
		{Register: true, Schemas: map[string]SchemaSource{"s": {Type: "avro", Schema: pingSchema}}},
		{Register: true, Version: 1, Topics: map[string]TopicConfig{"t": {Version: 1}, "u": {Version: 5, Register: &no}},
			Schemas: map[string]SchemaSource{"t-value": {Schema: pingSchema}}},
		{Version: 5, Topics: map[string]TopicConfig{"t": {Register: &yes}}, SubjectStrategy: StrategyRecord,
			Schemas: map[string]SchemaSource{"shop.Refund": {Schema: pingSchema}}}, // version is the topic's own: latest
		{Register: true, SubjectStrategy: StrategyRecord, Topics: map[string]TopicConfig{"t": {}},
			Schemas: map[string]SchemaSource{"shop.Refund": {Schema: pingSchema}}}, // the subject is the event's type
	} {
		ok.URL = "http://r"
		if err := ok.Validate(); err != nil {
			t.Errorf("valid registration %+v: %v", ok, err)
		}
	}
}
