package main

import (
	"encoding/binary"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"

	"github.com/outboxkit/outboxkit/outbox"
)

// xlogData wraps a pgoutput message as the walsender sends it (CopyData 'w').
func xlogData(msg []byte) []byte {
	out := append([]byte{pglogrepl.XLogDataByteID}, make([]byte, 24)...)
	return append(out, msg...)
}

// pgoutputMessage is a transactional logical decoding message in pgoutput's protocol 2.
func pgoutputMessage(prefix string, content []byte) []byte {
	m := []byte{'M', 1}
	m = binary.BigEndian.AppendUint64(m, 0x1000)
	m = append(append(m, prefix...), 0)
	m = binary.BigEndian.AppendUint32(m, uint32(len(content)))
	return append(m, content...)
}

// TestWALDecoderTakesTheOutboxMessages: the wal ceiling's decoder turns a message with the
// outbox's prefix into its envelope's events, skips a message of another prefix, and ends a
// transaction at its commit.
func TestWALDecoderTakesTheOutboxMessages(t *testing.T) {
	table, err := outbox.NewTable(outbox.Postgres, "bench_wal")
	if err != nil {
		t.Fatal(err)
	}
	events := []outbox.Event{makeEvent("t", 1, 10, 32, false), makeEvent("t", 2, 10, 32, false)}
	for i := range events {
		events[i].ID = uuid.Must(uuid.NewV7())
	}
	env, err := outbox.AppendWALEnvelope(nil, events)
	if err != nil {
		t.Fatal(err)
	}
	d := walDecoder{prefix: table.WALPrefix()}
	m, err := d.decode(xlogData(pgoutputMessage(table.WALPrefix(), env)))
	if err != nil || m.kind != ceilingEvents || len(m.events) != 2 || m.events[1].ID != events[1].ID {
		t.Fatalf("the outbox's message: kind %d, %d events, %v", m.kind, len(m.events), err)
	}
	if m, err := d.decode(xlogData(pgoutputMessage("outboxkit:other_table", env))); err != nil || m.kind != ceilingSkip {
		t.Errorf("another prefix's message: kind %d, %v; want it skipped", m.kind, err)
	}
	commit := []byte{'C', 0}
	for _, v := range []uint64{0x1000, 0x2000, 0} {
		commit = binary.BigEndian.AppendUint64(commit, v)
	}
	if m, err := d.decode(xlogData(commit)); err != nil || m.kind != ceilingCommit || m.end != 0x2000 {
		t.Errorf("commit: kind %d end %s, %v", m.kind, m.end, err)
	}
}
