package outbox

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// The wal envelope (docs/wal.md): the content of the transactional logical decoding message
// (pg_logical_emit_message(true, prefix, content)) that carries events when the writer is in
// [ModeWAL]. All integers are big-endian.
//
//	u8  version            WALEnvelopeVersion (1)
//	u16 event count        1 or more
//	then, per event, in write order:
//	  [16]byte event id    the UUID's 16 bytes
//	  i64 created at       microseconds since 1970-01-01 00:00:00 UTC
//	  u8 len, bytes        topic
//	  u8 len, bytes        aggregate type
//	  u8 len, bytes        aggregate id
//	  u8 len, bytes        event type
//	  u8 len, bytes        tenant id
//	  u16 header count     then per header, by name in byte order:
//	    u8 len, bytes      name
//	    u16 len, bytes     value
//	  u32 len, bytes       payload
//
// Text is UTF-8. The limits of validate.go keep every length within its field.
const WALEnvelopeVersion = 1

// WALPrefixBase starts the prefix of every message outboxkit emits: "outboxkit:" followed by the
// table name in lower case ([Table.WALPrefix]).
const WALPrefixBase = "outboxkit:"

// walMaxEventsPerMessage and walMaxMessageBytes bound one message: a larger Write emits several,
// in order (PostgreSQL caps one message at 1 GB; a relay decodes a message as a whole).
const (
	walMaxEventsPerMessage = 1000
	walMaxMessageBytes     = 16 << 20
)

// WALPrefix is the prefix of the logical decoding messages that carry the table's events in
// [ModeWAL]: "outboxkit:" and the table name as PostgreSQL resolves an unquoted name, in lower
// case ("outboxkit:app.orders_outbox" for "App.Orders_Outbox"). Messages are per database: the
// prefix keeps two outboxes of one database apart. Writers and relays must spell the table the
// same way, both schema-qualified or both not: "outbox_events" and "public.outbox_events" are two
// prefixes.
func (t Table) WALPrefix() string { return WALPrefixBase + strings.ToLower(t.name) }

// WALEmitFunction is the SQL function the migration installs for writers in other languages
// (PostgreSQL, schema v10): "<table>_emit", in the table's schema (docs/writers.md).
func (t Table) WALEmitFunction() string { return t.name + "_emit" }

// WALSlots (PostgreSQL, schema v12) is the register of the replication slots that read the
// table's logical decoding messages: "<table>_wal_slots" ([CreateWALSlot]). <table>_emit refuses
// to emit unless every registered slot exists and is not invalidated; writers in [ModeWAL]
// check the slot of their configuration ([Config.WALSlot]).
func (t Table) WALSlots() string { return t.name + "_wal_slots" }

// WALDiscarded (PostgreSQL, schema v13) holds a tombstone of each event an operator discarded
// on a wal table, until the slot's confirmed position passed it: the wal relay does not park a
// tombstoned event again when a restarted session streams it again.
func (t Table) WALDiscarded() string { return t.name + "_wal_discarded" }

// walRefuseFunction raises the error of a refused emit (schema v12).
func (t Table) walRefuseFunction() string { return t.name + "_wal_refuse" }

// walMinEventBytes is the size of an event whose texts, headers and payload are all empty.
const walMinEventBytes = 16 + 8 + 5 + 2 + 4

// walEventSize is the encoded size of e, without the envelope's header.
func walEventSize(e *Event) int {
	n := 16 + 8 + 5 + len(e.Topic) + len(e.AggregateType) + len(e.AggregateID) + len(e.EventType) + len(e.TenantID) +
		2 + 4 + len(e.Payload)
	for name, value := range e.Headers {
		n += 1 + len(name) + 2 + len(value)
	}
	return n
}

// validateWAL adds what the envelope and the table a parked event is written into need beyond
// [Event.Validate]: text fields and headers of valid UTF-8 without NUL bytes (a row stores them
// as text and jsonb), and at most 65535 headers.
func (e Event) validateWAL() error {
	bad := func(field, value string) error {
		return fmt.Errorf("%w %s (type %q, aggregate %q): %s %q must be valid UTF-8 without NUL bytes (ModeWAL)",
			ErrInvalidEvent, e.ID, e.EventType, e.AggregateID, field, value)
	}
	for _, f := range []struct{ name, value string }{
		{"topic", e.Topic}, {"aggregate type", e.AggregateType}, {"aggregate id", e.AggregateID},
		{"event type", e.EventType}, {"tenant id", e.TenantID},
	} {
		if !walText(f.value) {
			return bad(f.name, f.value)
		}
	}
	if len(e.Headers) > 0xffff {
		return fmt.Errorf("%w %s: %d headers, the limit is 65535", ErrInvalidEvent, e.ID, len(e.Headers))
	}
	for name, value := range e.Headers {
		if !walText(value) {
			return bad("header "+name+" value", value)
		}
	}
	return nil
}

// walText reports whether s is valid UTF-8 without NUL bytes, as PostgreSQL text must be.
func walText(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

// AppendWALEnvelope appends the envelope of events (validated, with ids and creation times) to
// dst. It is what [ModeWAL] writers emit; the relay decodes it with [DecodeWALEnvelope].
func AppendWALEnvelope(dst []byte, events []Event) ([]byte, error) {
	if len(events) == 0 || len(events) > 0xffff {
		return nil, fmt.Errorf("outbox: a wal envelope holds 1 to 65535 events, not %d", len(events))
	}
	dst = append(dst, WALEnvelopeVersion)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(events)))
	for i := range events {
		e := &events[i]
		for _, s := range [5]string{e.Topic, e.AggregateType, e.AggregateID, e.EventType, e.TenantID} {
			if len(s) > 0xff {
				return nil, fmt.Errorf("outbox: event %s: a %d-byte text field does not fit the wal envelope", e.ID, len(s))
			}
		}
		if uint64(len(e.Payload)) > math.MaxUint32 {
			return nil, fmt.Errorf("outbox: event %s: a %d-byte payload does not fit the wal envelope", e.ID, len(e.Payload))
		}
		dst = append(dst, e.ID[:]...)
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.CreatedAt.UnixMicro()))
		for _, s := range [5]string{e.Topic, e.AggregateType, e.AggregateID, e.EventType, e.TenantID} {
			dst = append(append(dst, byte(len(s))), s...)
		}
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(e.Headers)))
		names := make([]string, 0, len(e.Headers))
		for name := range e.Headers {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			value := e.Headers[name]
			if len(name) > 0xff || len(value) > 0xffff {
				return nil, fmt.Errorf("outbox: event %s: header %q does not fit the wal envelope", e.ID, name)
			}
			dst = append(append(dst, byte(len(name))), name...)
			dst = binary.BigEndian.AppendUint16(dst, uint16(len(value)))
			dst = append(dst, value...)
		}
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(e.Payload)))
		dst = append(dst, e.Payload...)
	}
	return dst, nil
}

// ErrWALEnvelope is wrapped by every error of [DecodeWALEnvelope].
var ErrWALEnvelope = errors.New("invalid wal envelope")

// DecodeWALEnvelope decodes the content of an outboxkit logical decoding message into its events,
// in write order. Payloads share content's memory. An unknown version or a malformed envelope (a
// length past its end, bytes after the last event, a header name twice) is an error wrapping
// [ErrWALEnvelope]; a relay must not skip such a message silently. Headers in another order than
// the writers' (by name) are accepted. Decoding checks the layout, not the writer's rules
// (validate.go): a message emitted by hand may carry what the Writer refuses.
func DecodeWALEnvelope(content []byte) ([]Event, error) {
	d := walDecoder{buf: content}
	if version := d.u8(); d.err == nil && version != WALEnvelopeVersion {
		return nil, fmt.Errorf("outbox: %w: version %d, this version of outboxkit reads version %d",
			ErrWALEnvelope, version, WALEnvelopeVersion)
	}
	count := int(d.u16())
	if d.err == nil && count == 0 {
		return nil, fmt.Errorf("outbox: %w: no events", ErrWALEnvelope)
	}
	// Each event takes at least walMinEventBytes: a forged count does not make a large slice.
	events := make([]Event, 0, min(count, len(d.buf)/walMinEventBytes))
	for i := 0; i < count && d.err == nil; i++ {
		var e Event
		copy(e.ID[:], d.bytes(16))
		e.CreatedAt = time.UnixMicro(int64(d.u64())).UTC()
		e.Topic, e.AggregateType, e.AggregateID = d.str8(), d.str8(), d.str8()
		e.EventType, e.TenantID = d.str8(), d.str8()
		if headers := int(d.u16()); headers > 0 {
			e.Headers = make(map[string]string, headers)
			for range headers {
				name := d.str8()
				if _, dup := e.Headers[name]; dup && d.err == nil {
					d.err = fmt.Errorf("event %s: header %q twice", e.ID, name)
				}
				e.Headers[name] = string(d.bytes(int(d.u16())))
			}
		}
		e.Payload = d.bytes(int(d.u32()))
		events = append(events, e)
	}
	if d.err == nil && len(d.buf) > 0 {
		d.err = fmt.Errorf("%d bytes after the last event", len(d.buf))
	}
	if d.err != nil {
		return nil, fmt.Errorf("outbox: %w: %v", ErrWALEnvelope, d.err)
	}
	return events, nil
}

// walDecoder reads the envelope's fields; the first short read sets err, and later reads return
// zero values.
type walDecoder struct {
	buf []byte
	err error
}

func (d *walDecoder) bytes(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n > len(d.buf) {
		d.err = fmt.Errorf("truncated: %d bytes wanted, %d left", n, len(d.buf))
		return nil
	}
	b := d.buf[:n:n]
	d.buf = d.buf[n:]
	return b
}

func (d *walDecoder) u8() uint8 {
	if b := d.bytes(1); b != nil {
		return b[0]
	}
	return 0
}

func (d *walDecoder) u16() uint16 {
	if b := d.bytes(2); b != nil {
		return binary.BigEndian.Uint16(b)
	}
	return 0
}

func (d *walDecoder) u32() uint32 {
	if b := d.bytes(4); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

func (d *walDecoder) u64() uint64 {
	if b := d.bytes(8); b != nil {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}

func (d *walDecoder) str8() string { return string(d.bytes(int(d.u8()))) }

// walEnvelopes splits events into envelopes within the per-message bounds, in order.
func walEnvelopes(events []Event) ([][]byte, error) {
	var out [][]byte
	for start := 0; start < len(events); {
		end, size := start, 3
		for end < len(events) && end-start < walMaxEventsPerMessage {
			n := walEventSize(&events[end])
			if end > start && size+n > walMaxMessageBytes {
				break
			}
			size += n
			end++
		}
		env, err := AppendWALEnvelope(make([]byte, 0, size), events[start:end])
		if err != nil {
			return nil, err
		}
		out = append(out, env)
		start = end
	}
	return out, nil
}
