package bookkeeping

import "github.com/outboxkit/outboxkit/forwarder/internal/sqlstore"

// Row states, as the Admin reports them and the blocked-keys gauge labels them.
const (
	StatePending   = "pending"
	StateRetrying  = "retrying"
	StatePublished = "published"
	StateDead      = "dead"
	StateSkipped   = "skipped"
	StateScheduled = "scheduled"
)

// StateOf names the state of a row from its status column and its attempts: a pending row that
// failed at least once is retrying.
func StateOf(status, attempts int) string {
	switch {
	case status == sqlstore.StatusDead:
		return StateDead
	case status == sqlstore.StatusSkipped:
		return StateSkipped
	case status == sqlstore.StatusPublished:
		return StatePublished
	case status == sqlstore.StatusScheduled:
		return StateScheduled
	case attempts > 0:
		return StateRetrying
	}
	return StatePending
}
