package bookkeeping

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/outboxkit/outboxkit/forwarder/internal/sqlstore"
	"github.com/outboxkit/outboxkit/outbox"
)

// The unit count of a lease group must not change: relays that grouped the partitions
// differently would not read the last checkpoint of every unit that published a row, and could
// publish it again. The units table records the count in the row "<prefix>/units"
// (sqlstore.UnitCount), written once by the first relay that starts; earlier versions did not
// write it, and for their groups the count is read off the units' own rows, "<prefix>/uNN",
// which every opening of a unit makes before the unit publishes.

// MinDefaultUnits is the fewest transactional units a lease group gets by default: fewer units
// make fewer, larger transactions, each with a fixed cost at the broker (docs/exactly-once.md).
const MinDefaultUnits = 2

// DefaultUnits is the unit count of a lease group of relays with this many workers whose units
// table records none.
func DefaultUnits(workers int) int { return max(MinDefaultUnits, workers) }

// UnitCountRow names the units table's row that holds the unit count of the units named
// "<prefix>/uNN".
func UnitCountRow(prefix string) string { return prefix + "/units" }

// UnitCount returns the unit count the units table of table records for prefix, 0 when none is.
func UnitCount(ctx context.Context, q sqlstore.Querier, st sqlstore.Statements, table outbox.Table, prefix string) (int, error) {
	var value string
	err := st.UnitCount(UnitCountRow(prefix)).QueryRow(ctx, q).Scan(&value)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read the transactional unit count of %s in %s: %w", prefix, table.Units(), err)
	}
	n, err := strconv.Atoi(value)
	if err != nil || n <= 0 || outbox.Partitions%n != 0 {
		return 0, fmt.Errorf("the transactional unit count of %s in %s is %q, not a divisor of %d", prefix, table.Units(), value, outbox.Partitions)
	}
	return n, nil
}

// RecordedUnits returns the unit count the units table records for the units named
// "<prefix>/uNN" (UnitCountOf the highest NN; 0 when there is none): the count of a group of a
// version that did not record it.
func RecordedUnits(ctx context.Context, q sqlstore.Querier, st sqlstore.Statements, table outbox.Table, prefix string) (int, error) {
	rows, err := st.UnitNames().Query(ctx, q)
	if err != nil {
		return 0, fmt.Errorf("read the transactional units of %s: %w", table.Units(), err)
	}
	defer rows.Close()
	highest := -1
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return 0, fmt.Errorf("read the transactional units of %s: %w", table.Units(), err)
		}
		if n, ok := UnitIndex(name, prefix); ok {
			highest = max(highest, n)
		}
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("read the transactional units of %s: %w", table.Units(), err)
	}
	if highest < 0 {
		return 0, nil
	}
	return UnitCountOf(highest), nil
}

// UnitCountOf is the unit count that the highest unit number recorded implies: the smallest
// divisor of outbox.Partitions above it. The rows of a group's higher units can be missing where
// a relay of an earlier version opened only some of its units; since the units table exists, a
// unit without a row has never published.
func UnitCountOf(highest int) int {
	n := 1
	for n <= highest && n < outbox.Partitions {
		n *= 2
	}
	return n
}

// UnitIndex parses NN out of a unit name "<prefix>/uNN"; ok is false for another prefix.
func UnitIndex(name, prefix string) (n int, ok bool) {
	rest, found := strings.CutPrefix(name, prefix+"/u")
	if !found {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil && n >= 0
}
