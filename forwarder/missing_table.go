package forwarder

import (
	"errors"
	"strings"
)

// ErrNotMigrated is returned by Run when the outbox table does not exist: waiting cannot help,
// the schema must be created (outbox.Migrate, or `outboxkit migrate`).
var ErrNotMigrated = errors.New("the outbox table does not exist: create the schema first (outbox.Migrate, or `outboxkit migrate`)")

// isMissingTable reports whether err says a table does not exist: SQLSTATE 42P01 (PostgreSQL),
// error 1146 (MySQL/MariaDB), "no such table" (SQLite). The drivers' error types are matched by
// their methods and messages so that this package does not import them.
func isMissingTable(err error) bool {
	if err == nil {
		return false
	}
	var state interface{ SQLState() string }
	if errors.As(err, &state) && state.SQLState() == "42P01" {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "Error 1146") || strings.Contains(msg, "no such table")
}
