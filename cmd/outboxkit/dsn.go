package main

import (
	"fmt"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outboxkit/outboxkit/cmd/outboxkit/internal/relayconfig"
	"github.com/outboxkit/outboxkit/outbox"
)

// checkDSN parses the data source name as the dialect's driver will: one it cannot parse is a
// configuration error naming database.dsn (its password redacted), not an unreachable database.
func checkDSN(cfg relayconfig.Database) error {
	var err error
	switch cfg.Dialect {
	case outbox.Postgres:
		_, err = pgconn.ParseConfig(cfg.DSN)
	case outbox.MySQL:
		_, err = mysql.ParseDSN(cfg.DSN)
	}
	if err != nil {
		return usageErr(fmt.Errorf("database.dsn: %s is not a %s data source name: %w", relayconfig.RedactDSN(cfg.DSN), cfg.Dialect, err))
	}
	return nil
}
