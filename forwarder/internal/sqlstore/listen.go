package sqlstore

import (
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/outboxkit/outboxkit/outbox"
)

// Listen is the statement that subscribes a PostgreSQL session to the table's notification
// channel, which the migration's trigger notifies on a committing insert while a relay waits.
func Listen(table outbox.Table) string {
	return "LISTEN " + pgx.Identifier{table.Channel()}.Sanitize()
}

// WaitLock is the statement that takes the table's wake-up lock (outbox.Table.WakeLock) on the
// session if it is free, without waiting: true once every writer that did not notify has ended
// and the writers notify from now on.
func WaitLock(table outbox.Table) string {
	return fmt.Sprintf("SELECT pg_try_advisory_lock(%d, %d)", outbox.WakeNamespace, table.WakeLock())
}

// WaitUnlock is the statement that releases the wake-up lock WaitLock took: the writers stop
// notifying.
func WaitUnlock(table outbox.Table) string {
	return fmt.Sprintf("SELECT pg_advisory_unlock(%d, %d)", outbox.WakeNamespace, table.WakeLock())
}

// LatestSeq is the query the listener watches while its relay is busy: the highest committed seq
// (NULL for an empty table), read backwards from the primary key.
func LatestSeq(table outbox.Table) string {
	return "SELECT max(seq) FROM " + table.Events()
}
