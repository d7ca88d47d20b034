package schema

import (
	"context"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/sr"
)

// maxReferences bounds the schemas one registered schema may reference, directly or through
// others.
const maxReferences = 64

// reference is a schema another one references: its name (the Protobuf import path, the JSON
// Schema $ref, the Avro type's full name) and its text.
type reference struct{ name, text string }

// fetchReferences returns the schemas refs name, directly or through the schemas they reference,
// each before the schemas that reference it (Avro parses named types before their users). A
// schema referenced twice is fetched once; a cycle ends there.
func fetchReferences(ctx context.Context, client *sr.Client, refs []sr.SchemaReference) ([]reference, error) {
	var out []reference
	seen := map[string]bool{}
	var visit func([]sr.SchemaReference) error
	visit = func(refs []sr.SchemaReference) error {
		for _, r := range refs {
			key := r.Subject + "\x00" + strconv.Itoa(r.Version)
			if seen[key] {
				continue
			}
			seen[key] = true
			if len(seen) > maxReferences {
				return fmt.Errorf("more than %d referenced schemas", maxReferences)
			}
			ss, err := client.SchemaByVersion(ctx, r.Subject, r.Version)
			if err != nil {
				return fmt.Errorf("reference %q (subject %q version %d): %w", r.Name, r.Subject, r.Version, err)
			}
			if err := visit(ss.References); err != nil {
				return err
			}
			out = append(out, reference{name: r.Name, text: ss.Schema.Schema})
		}
		return nil
	}
	return out, visit(refs)
}
