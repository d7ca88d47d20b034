package schema

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// jsonSchemaFile is the URL the registered JSON Schema is compiled under.
const jsonSchemaFile = "registered.schema.json"

// jsonSchemaCodec validates payloads against a registered JSON Schema with
// github.com/santhosh-tekuri/jsonschema/v6 and publishes them as they are (the wire format's
// body is the JSON itself).
type jsonSchemaCodec struct {
	schema  *jsonschema.Schema
	printer *message.Printer
}

// newJSONSchemaCodec compiles text with the schemas it references as resources under their
// reference names (a $ref names one by its reference name, or by its own $id).
func newJSONSchemaCodec(text string, refs []reference) (codec, error) {
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	for _, r := range refs {
		refDoc, err := jsonschema.UnmarshalJSON(strings.NewReader(r.text))
		if err != nil {
			return nil, fmt.Errorf("referenced schema %q: %w", r.name, err)
		}
		if err := c.AddResource(r.name, refDoc); err != nil {
			return nil, fmt.Errorf("referenced schema %q: %w", r.name, err)
		}
	}
	c.DefaultDraft(jsonschema.Draft7) // Confluent's serializers' draft, for schemas without $schema
	// No loader: a $ref outside the registered schema fails to compile instead of reading a
	// local file or the network.
	c.UseLoader(jsonschema.SchemeURLLoader{})
	if err := c.AddResource(jsonSchemaFile, doc); err != nil {
		return nil, err
	}
	compiled, err := c.Compile(jsonSchemaFile)
	if err != nil {
		return nil, err
	}
	return jsonSchemaCodec{schema: compiled, printer: message.NewPrinter(language.English)}, nil
}

func (c jsonSchemaCodec) encode(payload []byte, _ string) ([]int, []byte, *mismatch) {
	if _, m := decodeJSON(payload); m != nil {
		return nil, nil, m
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(payload))
	if err != nil {
		return nil, nil, &mismatch{"$", "not JSON: " + err.Error()}
	}
	err = c.schema.Validate(inst)
	if err == nil {
		return nil, payload, nil
	}
	verr, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return nil, nil, &mismatch{"$", err.Error()}
	}
	leaf := deepestCause(verr)
	return nil, nil, &mismatch{instancePath(inst, leaf.InstanceLocation), leaf.ErrorKind.LocalizedString(c.printer)}
}

// deepestCause is the first of the error's leaf causes with the longest instance location: the
// most specific place the payload goes wrong.
func deepestCause(e *jsonschema.ValidationError) *jsonschema.ValidationError {
	best := e
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			if len(best.Causes) > 0 || len(e.InstanceLocation) > len(best.InstanceLocation) {
				best = e
			}
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(e)
	return best
}

// instancePath writes a JSON pointer's tokens as a path like $.items[1].qty, an array index in
// brackets (as the Avro and Protobuf encoders name fields).
func instancePath(inst any, tokens []string) string {
	var sb strings.Builder
	sb.WriteString("$")
	for _, tok := range tokens {
		switch v := inst.(type) {
		case []any:
			i, err := strconv.Atoi(tok)
			if err == nil && i >= 0 && i < len(v) {
				sb.WriteString("[" + tok + "]")
				inst = v[i]
				continue
			}
		case map[string]any:
			inst = v[tok]
		default:
			inst = nil
		}
		sb.WriteString("." + tok)
	}
	return sb.String()
}

// decode returns the body, once it is valid against the schema (as Confluent's JSONDeserializer
// checks).
func (c jsonSchemaCodec) decode(body []byte) ([]byte, *mismatch) {
	_, out, m := c.encode(body, "")
	return out, m
}
