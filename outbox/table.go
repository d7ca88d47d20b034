package outbox

import (
	"fmt"
	"strings"
)

// DefaultTable is the outbox table name used when none is configured.
const DefaultTable = "outbox_events"

// Table names an outbox table of one dialect and the relay tables derived from it. It is the
// one place both the write side and the forwarder take table names from; every name in it has
// been validated by [ValidateIdentifier].
type Table struct {
	dialect Dialect
	name    string
}

// NewTable validates the dialect and the table name ("" means [DefaultTable]).
func NewTable(dialect Dialect, name string) (Table, error) {
	if err := dialect.Validate(); err != nil {
		return Table{}, err
	}
	if name == "" {
		name = DefaultTable
	}
	if err := ValidateIdentifier(name); err != nil {
		return Table{}, fmt.Errorf("outbox: table name: %w", err)
	}
	if dialect == SQLite && strings.Contains(name, ".") {
		return Table{}, fmt.Errorf("outbox: table name: %w %q: SQLite tables cannot be schema-qualified here",
			ErrInvalidIdentifier, name)
	}
	return Table{dialect: dialect, name: name}, nil
}

// Dialect returns the table's dialect.
func (t Table) Dialect() Dialect { return t.dialect }

// Events is the outbox table itself.
func (t Table) Events() string { return t.name }

// Leases holds one row per relay partition: which relay owns it, until when.
func (t Table) Leases() string { return t.name + "_leases" }

// Relays holds one heartbeat row per running relay.
func (t Table) Relays() string { return t.name + "_relays" }

// KeyLocks (MySQL only) holds one row per ordering key hash, locked by writers to serialize
// transactions that write events of the same key.
func (t Table) KeyLocks() string { return t.name + "_key_locks" }

// Migrations records the applied schema versions.
func (t Table) Migrations() string { return t.name + "_migrations" }

// Installation holds the one row naming this outbox installation: an id made once, when the
// table is migrated, that exactly-once delivery puts in its transactional ids and checkpoints,
// so that installations sharing a Kafka cluster never fence each other or apply each other's
// checkpoints.
func (t Table) Installation() string { return t.name + "_installation" }

// Units records, per exactly-once transactional unit, the last checkpoint whose rows are
// acknowledged, written in the same transaction as the acknowledgement: a later opening of the
// unit does not apply that checkpoint again (which would undo an operator's replay).
func (t Table) Units() string { return t.name + "_units" }

// Tables lists every table the migrations create for the outbox: the events, the relay tables
// and the migrations table (KeyLocks on MySQL, CDCSlots, WALSlots and WALDiscarded on PostgreSQL only). Tests
// and tools that drop an outbox drop these.
func (t Table) Tables() []string {
	return []string{t.Events(), t.Leases(), t.Relays(), t.KeyLocks(), t.CDCSlots(), t.WALSlots(), t.WALDiscarded(), t.Installation(), t.Units(), t.Migrations()}
}

// Functions lists the signatures of the functions the PostgreSQL migrations create beside the
// outbox table (none on MySQL/MariaDB and SQLite). Dropping the tables keeps them: tools that
// drop an outbox drop these too.
func (t Table) Functions() []string {
	if t.dialect != Postgres {
		return nil
	}
	ev := t.name
	return []string{
		ev + "_notify()",
		ev + "_key_hash(text, text, text)",
		ev + "_prepare()",
		ev + "_schedule()",
		ev + "_emit(text, text, text, text, bytea, jsonb, text, uuid, timestamptz, timestamptz)",
		// schema v10 to v13's, which v14 replaced: an outbox not yet migrated past v13 has it
		ev + "_emit(text, text, text, text, bytea, jsonb, text, uuid, timestamptz)",
		ev + "_wal_guard()",
		ev + "_wal_refuse(text)",
		ev + "_wal_discard()",
	}
}

// Channel is the PostgreSQL LISTEN/NOTIFY channel a commit into the table notifies.
func (t Table) Channel() string { return "outboxkit_" + strings.ReplaceAll(t.name, ".", "_") }

// Publication is the PostgreSQL publication the CDC relay of installation (the table's
// identity, [ReadInstallation]) reads, the inserts into the table:
// "outboxkit_<table>_<8 hex digits of the installation's hash>", checked like every other
// identifier. Publications are per database: the installation in the name keeps two outboxes
// with the same table name (in two schemas) apart. Installation "" gives the name used before
// installations existed (schema v5), for upgrades.
func (t Table) Publication(installation string) (string, error) {
	name := "outboxkit_" + strings.ToLower(strings.ReplaceAll(t.name, ".", "_"))
	if installation != "" {
		name += fmt.Sprintf("_%08x", uint32(AdvisoryKey("publication:"+installation)))
	}
	if err := checkIdentifier(name, maxIdentifierPart); err != nil {
		return "", fmt.Errorf("outbox: publication of table %s: %w", t.name, err)
	}
	return name, nil
}

// CDCSlots (PostgreSQL) records the CDC relay's replication slots and whether the rows committed
// before each slot existed have been drained.
func (t Table) CDCSlots() string { return t.name + "_cdc_slots" }

// Slot names the logical replication slot of a lease group of the CDC relay of installation
// (the table's identity, [ReadInstallation]): "obk_<table>_<8 hex digits of the installation's
// and the group's hash>", in lower case (slot names allow only a-z, 0-9 and _), checked like
// every other identifier. Slots are per cluster: the installation in the hash keeps two outboxes
// with the same table name (in two schemas or databases) apart. Installation "" gives the name
// used before installations existed (schema v5), for upgrades.
func (t Table) Slot(installation, group string) (string, error) {
	key := "slot:" + group
	if installation != "" {
		key = "slot:" + installation + "/" + group
	}
	name := fmt.Sprintf("obk_%s_%08x", strings.ToLower(strings.ReplaceAll(t.name, ".", "_")), uint32(AdvisoryKey(key)))
	if err := checkIdentifier(name, maxIdentifierPart); err != nil {
		return "", fmt.Errorf("outbox: replication slot of lease group %q: %w", group, err)
	}
	return name, nil
}

// shortName is the unqualified table name, a prefix for index and trigger names.
func (t Table) shortName() string {
	if i := strings.LastIndexByte(t.name, '.'); i >= 0 {
		return t.name[i+1:]
	}
	return t.name
}

// String returns the table name.
func (t Table) String() string { return t.name }
