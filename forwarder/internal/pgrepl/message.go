package pgrepl

import (
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
)

// Message is one message of the stream, decoded. Every message says how far the server's WAL
// reached when it was sent (ServerWALEnd).
type Message interface {
	ServerWALEnd() LSN
}

// Keepalive is the server's keepalive: it has sent everything before WALEnd.
type Keepalive struct {
	WALEnd LSN
	// ReplyRequested asks for a standby status update at once.
	ReplyRequested bool
}

// Begin starts a transaction: its id and the end of its commit record.
type Begin struct {
	WALEnd   LSN
	Xid      uint32
	FinalLSN LSN
}

// Insert is a row inserted into the outbox table by the transaction being decoded.
type Insert struct {
	WALEnd LSN
	Row    Row
}

// Commit ends the transaction being decoded: once everything before EndLSN is settled, the
// slot may be confirmed up to EndLSN.
type Commit struct {
	WALEnd LSN
	EndLSN LSN
	Time   time.Time
}

// LogicalMessage is a logical decoding message (pg_logical_emit_message): transactional ones
// arrive between their transaction's Begin and Commit, in WAL order; Content aliases the
// received data, which is not reused.
type LogicalMessage struct {
	WALEnd        LSN
	LSN           LSN
	Transactional bool
	Prefix        string
	Content       []byte
}

// Skipped is a message that carries nothing for the outbox (a relation message, an insert into
// another table, a message of a type the source does not use).
type Skipped struct{ WALEnd LSN }

// ServerWALEnd is how far the server's WAL reached.
func (m Keepalive) ServerWALEnd() LSN { return m.WALEnd }

// ServerWALEnd is how far the server's WAL reached.
func (m Begin) ServerWALEnd() LSN { return m.WALEnd }

// ServerWALEnd is how far the server's WAL reached.
func (m Insert) ServerWALEnd() LSN { return m.WALEnd }

// ServerWALEnd is how far the server's WAL reached.
func (m Commit) ServerWALEnd() LSN { return m.WALEnd }

// ServerWALEnd is how far the server's WAL reached.
func (m LogicalMessage) ServerWALEnd() LSN { return m.WALEnd }

// ServerWALEnd is how far the server's WAL reached.
func (m Skipped) ServerWALEnd() LSN { return m.WALEnd }

// Decode decodes one CopyData payload of the stream: a primary keepalive, or XLogData
// carrying a pgoutput message (protocol 2). ok is false for a payload of another kind. An
// Insert's payload aliases data, which the caller must not reuse.
func (d *Decoder) Decode(data []byte) (m Message, ok bool, err error) {
	if len(data) == 0 {
		return nil, false, nil
	}
	switch data[0] {
	case pglogrepl.PrimaryKeepaliveMessageByteID:
		ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(data[1:])
		if err != nil {
			return nil, false, fmt.Errorf("cdc: parse keepalive: %w", err)
		}
		return Keepalive{WALEnd: ka.ServerWALEnd, ReplyRequested: ka.ReplyRequested}, true, nil
	case pglogrepl.XLogDataByteID:
		xld, err := pglogrepl.ParseXLogData(data[1:])
		if err != nil {
			return nil, false, fmt.Errorf("cdc: parse XLogData: %w", err)
		}
		m, err := d.decodeWAL(xld.ServerWALEnd, xld.WALData)
		return m, err == nil, err
	}
	return nil, false, nil
}

// decodeWAL decodes one pgoutput message; the outbox's inserts by the decoder itself, the rest
// with pglogrepl. Streaming of in-progress transactions is off (Start), so no message carries an
// xid before its body.
func (d *Decoder) decodeWAL(walEnd LSN, data []byte) (Message, error) {
	if len(data) > 0 && data[0] == byte(pglogrepl.MessageTypeInsert) {
		row, ours, err := d.insert(data[1:])
		if err != nil || !ours {
			return Skipped{WALEnd: walEnd}, err
		}
		return Insert{WALEnd: walEnd, Row: row}, nil
	}
	if len(data) == 0 {
		return nil, errors.New("cdc: an empty pgoutput message")
	}
	switch pglogrepl.MessageType(data[0]) {
	case pglogrepl.MessageTypeRelation, pglogrepl.MessageTypeBegin, pglogrepl.MessageTypeCommit, pglogrepl.MessageTypeMessage:
	default:
		return Skipped{WALEnd: walEnd}, nil // not used by the source: left unparsed
	}
	msg, err := parsePgoutput(data)
	if err != nil {
		return nil, err
	}
	switch m := msg.(type) {
	case *pglogrepl.RelationMessageV2:
		return Skipped{WALEnd: walEnd}, d.Relation(m)
	case *pglogrepl.BeginMessage:
		return Begin{WALEnd: walEnd, Xid: m.Xid, FinalLSN: m.FinalLSN}, nil
	case *pglogrepl.CommitMessage:
		return Commit{WALEnd: walEnd, EndLSN: m.TransactionEndLSN, Time: m.CommitTime}, nil
	case *pglogrepl.LogicalDecodingMessageV2:
		return LogicalMessage{WALEnd: walEnd, LSN: m.LSN, Transactional: m.Transactional, Prefix: m.Prefix, Content: m.Content}, nil
	}
	return Skipped{WALEnd: walEnd}, nil
}

// parsePgoutput parses a relation, begin, commit or logical decoding message with pglogrepl, whose decoders index
// past the end of some truncated messages (a relation message cut inside its columns): such a
// panic is returned as the error it is, since a server never sends those messages.
func parsePgoutput(data []byte) (msg pglogrepl.Message, err error) {
	defer func() {
		if r := recover(); r != nil {
			msg, err = nil, fmt.Errorf("cdc: parse pgoutput message %q of %d bytes: malformed (%v)", data[0], len(data), r)
		}
	}()
	msg, err = pglogrepl.ParseV2(data, false)
	if err != nil {
		return nil, fmt.Errorf("cdc: parse pgoutput message %q: %w", data[0], err)
	}
	return msg, nil
}
