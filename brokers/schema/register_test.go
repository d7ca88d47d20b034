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

// A subject that has versions is never given another: its latest is used even when the
// configured schema differs, and a fixed version it does not have stays a failed lookup.
func TestEncoderNeverRegistersOverAnExistingSubject(t *testing.T) {
	cl, _, topic, id := registry(t) // orderSchema, version 1
	ctx := context.Background()
	enc, err := NewEncoder(cl, Config{Register: true, Schemas: map[string]sr.Schema{Subject(topic): {Schema: pingSchema}}})
	if err != nil {
		t.Fatal(err)
	}
	var mismatch *MismatchError
	if _, err := enc.Encode(ctx, topic, []byte(`{"n":7}`)); !errors.As(err, &mismatch) || mismatch.ID != id {
		t.Errorf("latest: %v, want a mismatch against the registered order schema (id %d)", err, id)
	}
	fixed, err := NewEncoder(cl, Config{Version: 3, Register: true, Schemas: map[string]sr.Schema{Subject(topic): {Schema: pingSchema}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fixed.Encode(ctx, topic, []byte(`{"n":7}`)); !notFound(err) {
		t.Errorf("version 3 of a subject with version 1: %v, want the not-found RegistryError", err)
	}
	if v := versionsOf(t, cl, Subject(topic)); len(v) != 1 {
		t.Errorf("versions %v, want only the first", v)
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
	} {
		tc.c.URL = "http://r"
		err := tc.c.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.c, err, tc.want)
		}
	}
	ok := RegistryConfig{URL: "http://r", Register: true, Schemas: map[string]SchemaSource{"s": {Type: "avro", Schema: pingSchema}}}
	if err := ok.Validate(); err != nil {
		t.Errorf("valid registration: %v", err)
	}
}
