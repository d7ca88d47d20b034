package main

import "fmt"

// writeRetryingDeadlocks runs write, and again when the database chose its transaction as a
// deadlock victim (isDeadlock). The outbox writer's per-key locks are database-wide, not per
// table, so another program writing the same aggregate ids into another outbox table of the
// shared database, taking the locks in another order (plain-SQL writers lock in row order), can
// deadlock with a backlog's fill; the victim's transaction was rolled back, so running it again
// writes each event once.
func writeRetryingDeadlocks(write func() error) error {
	var err error
	for range maxDeadlockRetries {
		if err = write(); err == nil || !isDeadlock(err) {
			return err
		}
	}
	return fmt.Errorf("%d deadlocks in a row: %w", maxDeadlockRetries, err)
}
