package sqlstore

import (
	"slices"
	"strconv"
	"strings"
)

// The statements of exactly-once delivery's bookkeeping: per transactional unit, the cleanup
// mark of the last checkpoint whose rows are acknowledged (its digest, and which partitions'
// rows when not all of them: the forwarder writes and reads the mark).

// UnitMark is the cleanup mark of a unit's checkpoint whose rows an acknowledgement settles.
type UnitMark struct {
	Unit string
	Mark string
}

// CleanedDigest selects the cleanup mark of the last checkpoint of unit whose rows are
// acknowledged.
func (s Statements) CleanedDigest(unit string) Query {
	return s.q("SELECT cleaned FROM "+s.table.Units()+" WHERE unit = ?", unit)
}

// EnsureUnitRow creates the units table's row of unit if it is missing, so that MarkCleaned
// only updates rows: an update by primary key locks just the row on every database, where an
// upsert takes gap locks on MySQL that could deadlock relays.
func (s Statements) EnsureUnitRow(unit string) Query {
	return s.q(s.d.InsertIgnore(s.table.Units(), "unit, cleaned, cleaned_at", "(?, '', ?)"), unit, s.nowArg())
}

// MarkCleaned records the checkpoints (not empty) whose rows an acknowledgement settles, in one
// statement, updating the rows in the order of the units' names.
func (s Statements) MarkCleaned(marks []UnitMark) Query {
	marks = slices.SortedFunc(slices.Values(marks), func(a, b UnitMark) int { return strings.Compare(a.Unit, b.Unit) })
	var cases strings.Builder
	caseArgs := make([]any, 0, 2*len(marks))
	names := make([]any, 0, len(marks))
	for _, m := range marks {
		cases.WriteString(" WHEN ? THEN ?")
		caseArgs = append(caseArgs, m.Unit, m.Mark)
		names = append(names, m.Unit)
	}
	args := append(append(caseArgs, s.nowArg()), names...)
	return s.q("UPDATE "+s.table.Units()+" SET cleaned = CASE unit"+cases.String()+" END, cleaned_at = ? WHERE unit IN "+in(len(marks)), args...)
}

// UnitNames selects the name of every unit the units table has a row of.
func (s Statements) UnitNames() Query {
	return s.q("SELECT unit FROM " + s.table.Units())
}

// The units table's row "<prefix>/units" holds a lease group's unit count, in decimal, in its
// cleaned column: the first relay to record it wins (InsertIgnore), so relays that start together
// with different counts agree on one. It keeps the count beside the units' rows without a
// column of its own.

// UnitCount selects the unit count recorded under name.
func (s Statements) UnitCount(name string) Query {
	return s.q("SELECT cleaned FROM "+s.table.Units()+" WHERE unit = ?", name)
}

// RecordUnitCount records count under name unless a count is recorded there already.
func (s Statements) RecordUnitCount(name string, count int) Query {
	return s.q(s.d.InsertIgnore(s.table.Units(), "unit, cleaned, cleaned_at", "(?, ?, ?)"), name, strconv.Itoa(count), s.nowArg())
}
