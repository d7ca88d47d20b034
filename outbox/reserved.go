package outbox

import (
	"fmt"
	"strings"
)

// reservedWords are the words PostgreSQL, MySQL/MariaDB or SQLite reserve, which an unquoted
// table or schema name cannot be. Table names are never quoted (they are validated instead), so
// one of these would fail in the middle of a migration, after "<name>_migrations" was created.
var reservedWords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`
accessible add all alter analyse analyze and any array as asc asensitive asymmetric authorization
autoincrement before between bigint binary blob both by call cascade case cast change char character
check collate collation column commit concurrently condition constraint continue convert create cross
current_catalog current_date current_role current_schema current_time current_timestamp current_user
cursor database databases day_hour day_microsecond day_minute day_second dec decimal declare default
deferrable delayed delete desc describe deterministic distinct distinctrow div do double drop dual each
else elseif enclosed end escape escaped except exists exit explain false fetch float float4 float8 for
force foreign freeze from full fulltext generated get grant group having high_priority hour_microsecond
hour_minute hour_second if ignore ilike in index infile initially inner inout insensitive insert int
int1 int2 int3 int4 int8 integer intersect interval into is isnull iterate join key keys kill lateral
leading leave left like limit linear lines load localtime localtimestamp lock long longblob longtext
loop low_priority match mediumblob mediumint mediumtext middleint minute_microsecond minute_second mod
modifies natural no_write_to_binlog not notnull null numeric offset on only optimize option optionally
or order out outer outfile over overlaps partition placing precision primary procedure purge range read
reads real recursive references regexp release rename repeat replace require resignal restrict return
returning revoke right rlike schema schemas second_microsecond select sensitive separator session_user
set show signal similar smallint some spatial specific sql sqlexception sqlstate sqlwarning ssl
starting stored straight_join symmetric system_user table tablesample terminated then tinyblob tinyint
tinytext to trailing transaction trigger true undo union unique unlock unsigned update usage use user
using utc_date utc_time utc_timestamp values varbinary varchar varcharacter variadic varying verbose
virtual when where while window with write xor year_month zerofill`) {
		reservedWords[w] = true
	}
}

// checkReserved refuses a name with a part that is a reserved word of one of the dialects.
func checkReserved(name string) error {
	for part := range strings.SplitSeq(name, ".") {
		if reservedWords[strings.ToLower(part)] {
			return fmt.Errorf("%w %q: %q is a reserved word in SQL (PostgreSQL, MySQL or SQLite); choose another name, such as %s_events",
				ErrInvalidIdentifier, name, part, strings.ToLower(part))
		}
	}
	return nil
}
