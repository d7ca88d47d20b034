// Package pgrepl is the PostgreSQL logical replication protocol as the forwarder's cdc source
// uses it, on pglogrepl: the replication connection, the slot (created over the replication
// protocol, read and dropped through the catalog), the publication, START_REPLICATION, the
// stream of pgoutput messages (protocol 2, binary tuples) decoded into the outbox table's rows,
// and the standby status updates that confirm a position. It knows nothing of leases,
// batches or brokers: the forwarder decides what to do with each message.
package pgrepl
