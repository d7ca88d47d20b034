package sqlstore

import (
	"github.com/jackc/pgx/v5"

	"github.com/outboxkit/outboxkit/outbox"
)

// Listen is the statement that subscribes a PostgreSQL session to the table's notification
// channel, which the migration's trigger notifies on every committing insert.
func Listen(table outbox.Table) string {
	return "LISTEN " + pgx.Identifier{table.Channel()}.Sanitize()
}
