package middleware

import (
	"fmt"
	"strings"
)

// maxIdentifierLen is PostgreSQL's identifier limit (NAMEDATALEN-1), the smallest of the three
// databases; MySQL allows 64 characters and SQLite has no limit.
const maxIdentifierLen = 63

// ValidateTableName reports whether name is a safe SQL table name: one identifier, or
// schema.table, each part made of ASCII letters, digits and underscores, not starting with a
// digit, at most 63 characters. Table names are concatenated into SQL (placeholders cannot
// stand for identifiers), so only names that pass this check are ever used.
func ValidateTableName(name string) error {
	if name == "" {
		return fmt.Errorf("table name is empty")
	}
	parts := strings.Split(name, ".")
	if len(parts) > 2 {
		return fmt.Errorf("table name %q: want table or schema.table, got %d dot-separated parts", name, len(parts))
	}
	for _, part := range parts {
		if err := validateIdentifier(part); err != nil {
			return fmt.Errorf("table name %q: %w", name, err)
		}
	}
	return nil
}

func validateIdentifier(id string) error {
	if id == "" {
		return fmt.Errorf("empty identifier")
	}
	if len(id) > maxIdentifierLen {
		return fmt.Errorf("identifier %q is %d characters long, the limit is %d", id, len(id), maxIdentifierLen)
	}
	for i, r := range id {
		switch {
		case r == '_', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case r >= '0' && r <= '9':
			if i == 0 {
				return fmt.Errorf("identifier %q starts with a digit", id)
			}
		default:
			return fmt.Errorf("identifier %q contains %q: only ASCII letters, digits and underscores are allowed", id, r)
		}
	}
	return nil
}
