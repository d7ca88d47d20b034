// Package admin is the operator's API over an outbox table that forwarder relays serve: what
// the outboxkit CLI's status, keys, dead-letters, relays, units and cdc slots commands, its
// admin HTTP API and its console show and do.
//
// An [Admin] (New, scoped to tenants with ForTenants) reads and changes the outbox's tables
// only; it needs no relay running, and a running relay sees its changes at its next claim:
//
//   - the backlog per topic (Status) and the keys the relay holds back behind a failing head
//     event (BlockedKeys);
//   - the dead and skipped events, listed (DeadLetters, FindDeadLetters with an EventFilter),
//     grouped by the fingerprint of their last error (FailureGroups, Fingerprint,
//     NormaliseError) or read whole (Event);
//   - the actions on them, each with a dry run that lists what it would touch: SkipKeys (move
//     a key's head out of its way, keeping it), ReplayDeadLetters and DiscardDeadLetters (by
//     filter), Replay and Discard (by event id);
//   - the relays of each lease group and their leases (Relays), the transactional units of an
//     exactly-once lease group with their last checkpoints (Units), and the cdc source's
//     replication slots (Slots, DropSlot; PostgreSQL).
//
// The Admin shares what it reads and names with the relay (row states, unit names and
// counts, the checkpoint format, the slots' drain state) through forwarder/internal packages;
// it does not import package forwarder, and forwarder does not import it. docs/operations.md
// walks through the operator's tasks; docs/admin-api.md is the HTTP API over this package.
package admin
