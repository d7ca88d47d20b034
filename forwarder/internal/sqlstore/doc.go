// Package sqlstore holds every SQL statement of the forwarder: the claim, the acknowledgement,
// the lease protocol, the exactly-once bookkeeping, the cdc source's marks and the operator's
// queries. Statements are values (Query: text in the database's placeholders, and arguments),
// rendered by Statements for one outbox table; what differs between databases is a Dialect
// adapter (postgres.go, mysql.go, sqlite.go), in the style of watermill-sql's schema and offsets
// adapters, so nothing outside this package branches on the database.
//
// Adding a database: implement Dialect in a file of its own, return it from For, and add it to
// the forwarder's golden test (forwarder/store_golden_test.go), which renders every statement
// for every dialect against the real servers.
package sqlstore
