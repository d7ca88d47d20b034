package forwarder

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// A database/sql driver that wraps a real one and records the text of every statement sent
// through it, for the store's golden test: the statements run against the real databases, and
// their text is what the test compares.

type recording struct {
	mu         sync.Mutex
	statements []string
}

func (r *recording) add(query string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.statements = append(r.statements, query)
}

// take returns the statements recorded since the last take.
func (r *recording) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.statements
	r.statements = nil
	return out
}

// recordingConnector opens connections of the wrapped driver and records their statements.
type recordingConnector struct {
	inner driver.Connector
	rec   *recording
}

func (c recordingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &recordingConn{inner: conn, rec: c.rec}, nil
}

func (c recordingConnector) Driver() driver.Driver { return c.inner.Driver() }

// openRecording opens dsn with driverName through the recorder.
func openRecording(driverName, dsn string, rec *recording) (*sql.DB, error) {
	db, err := sql.Open(driverName, dsn)
	if err != nil {
		return nil, err
	}
	drv := db.Driver()
	_ = db.Close()
	var connector driver.Connector
	if dc, ok := drv.(driver.DriverContext); ok {
		if connector, err = dc.OpenConnector(dsn); err != nil {
			return nil, err
		}
	} else {
		connector = dsnConnector{drv: drv, dsn: dsn}
	}
	return sql.OpenDB(recordingConnector{inner: connector, rec: rec}), nil
}

type dsnConnector struct {
	drv driver.Driver
	dsn string
}

func (c dsnConnector) Connect(context.Context) (driver.Conn, error) { return c.drv.Open(c.dsn) }
func (c dsnConnector) Driver() driver.Driver                        { return c.drv }

// recordingConn forwards every capability database/sql uses to the wrapped connection.
type recordingConn struct {
	inner driver.Conn
	rec   *recording
}

var errNoCapability = errors.New("recorder: the wrapped connection lacks this capability")

func (c *recordingConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *recordingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	c.rec.add(query)
	if p, ok := c.inner.(driver.ConnPrepareContext); ok {
		return p.PrepareContext(ctx, query)
	}
	return c.inner.Prepare(query)
}

func (c *recordingConn) Close() error { return c.inner.Close() }

func (c *recordingConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *recordingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if b, ok := c.inner.(driver.ConnBeginTx); ok {
		return b.BeginTx(ctx, opts)
	}
	return nil, fmt.Errorf("begin: %w", errNoCapability)
}

func (c *recordingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	e, ok := c.inner.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip // database/sql prepares the statement instead (recorded there)
	}
	c.rec.add(query)
	return e.ExecContext(ctx, query, args)
}

func (c *recordingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := c.inner.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	c.rec.add(query)
	return q.QueryContext(ctx, query, args)
}

func (c *recordingConn) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := c.inner.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

func (c *recordingConn) ResetSession(ctx context.Context) error {
	if r, ok := c.inner.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c *recordingConn) IsValid() bool {
	if v, ok := c.inner.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

func (c *recordingConn) Ping(ctx context.Context) error {
	if p, ok := c.inner.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

// Raw gives database/sql's Conn.Raw the wrapped connection (inLeaseTx discards a connection
// through it).
func (c *recordingConn) Raw() driver.Conn { return c.inner }

// render formats recorded statements for a golden file: each after a "-- name" line.
func render(b *strings.Builder, name string, statements []string) {
	fmt.Fprintf(b, "-- %s\n", name)
	for _, s := range statements {
		b.WriteString(s)
		b.WriteString(";\n")
	}
	b.WriteString("\n")
}
