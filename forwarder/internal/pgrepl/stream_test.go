package pgrepl_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/outboxkit/outboxkit/forwarder/internal/pgrepl"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

var updateCapture = flag.Bool("update-capture", false, "rewrite testdata/capture.json from a real stream")

// capture is a stream captured from PostgreSQL: the outbox table as resolved, and the CopyData
// payloads of one transaction inserting captureEvents, in order.
type capture struct {
	Target   pgrepl.Target
	Messages []string // hex
}

// captureEvents are the events the captured transaction writes.
func captureEvents() []outbox.Event {
	return []outbox.Event{
		{ID: uuid.MustParse("0b0a6c55-7e3c-4c1e-9d6a-3c1f1d1f0001"), Topic: "orders", AggregateType: "order", AggregateID: "o-1",
			EventType: "OrderPlaced", TenantID: "acme", Payload: []byte(`{"total":42}`), Headers: map[string]string{"trace": "abc"}},
		{ID: uuid.MustParse("0b0a6c55-7e3c-4c1e-9d6a-3c1f1d1f0002"), Topic: "orders", AggregateType: "order", AggregateID: "o-2",
			EventType: "OrderPaid", Payload: []byte("x")},
	}
}

// TestStreamDecodesInserts streams a fresh slot of a real table through Connect, CreateSlot,
// Start, Stream and the Decoder: Begin, the two inserts decoded as written, Commit. With
// -update-capture it records the stream for TestDecodeCapturedStream.
func TestStreamDecodesInserts(t *testing.T) {
	db := testsupport.OpenPostgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, err := outbox.NewWriter(outbox.Config{Dialect: outbox.Postgres, Table: "pgrepl_stream_test"})
	if err != nil {
		t.Fatal(err)
	}
	table := w.Table()
	const slot, pub = "pgrepl_stream_test_slot", "pgrepl_stream_test_pub"
	cleanup := func() {
		// A slot left behind keeps the server's WAL forever. Dropping it fails while the walsender
		// of the test's closed replication connection still holds it: try again for a while.
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
			_, err := db.Exec("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1", slot)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("drop replication slot %s: %v", slot, err)
				break
			}
		}
		_ = pgrepl.DropPublication(context.Background(), db, pub)
		for _, n := range table.Tables() {
			_, _ = db.Exec("DROP TABLE IF EXISTS " + n)
		}
	}
	cleanup()
	t.Cleanup(cleanup)
	if err := outbox.Migrate(ctx, db, table); err != nil {
		t.Fatal(err)
	}
	if err := pgrepl.CreatePublication(ctx, db, pub, table.Events()); err != nil {
		t.Fatal(err)
	}
	target, err := pgrepl.ResolveTable(ctx, db, table.Events())
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgrepl.Connect(ctx, testsupport.PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if created, err := pgrepl.CreateSlot(ctx, conn, slot); err != nil || !created {
		t.Fatalf("create slot: created %v, %v", created, err)
	}
	if st, err := pgrepl.ReadSlot(ctx, db, slot); err != nil || !st.Exists {
		t.Fatalf("read slot: %+v, %v", st, err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range captureEvents() {
		if err := w.WriteTx(ctx, tx, e); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := pgrepl.Start(ctx, conn, slot, pub); err != nil {
		t.Fatal(err)
	}
	payloads := receiveTransaction(ctx, t, conn)
	stream := decode(t, pgrepl.NewDecoder(target), payloads)
	checkTransaction(t, stream)
	if *updateCapture {
		c := capture{Target: target}
		for _, p := range payloads {
			c.Messages = append(c.Messages, hex.EncodeToString(p))
		}
		data, err := json.MarshalIndent(c, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("testdata", "capture.json"), append(data, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDecodeCapturedStream decodes a stream captured from PostgreSQL 15 (testdata/capture.json),
// without a database.
func TestDecodeCapturedStream(t *testing.T) {
	target, payloads := capturedPayloads(t)
	checkTransaction(t, decode(t, pgrepl.NewDecoder(target), payloads))

	// Another relation's inserts are skipped; a relation of the table's name with another OID
	// (the table recreated) ends the stream.
	other := target
	other.OID++
	other.Name = "not_the_outbox"
	for _, m := range decode(t, pgrepl.NewDecoder(other), payloads) {
		if _, ok := m.(pgrepl.Insert); ok {
			t.Fatalf("an insert into another relation was decoded as the outbox's: %+v", m)
		}
	}
	recreated := target
	recreated.OID++
	d := pgrepl.NewDecoder(recreated)
	var failed bool
	for _, p := range payloads {
		if _, _, err := d.Decode(p); err != nil {
			failed = true
		}
	}
	if !failed {
		t.Fatal("a relation of the outbox's name with another OID was accepted")
	}
	// An insert before its relation message is refused. (An XLogData payload is 'w', three
	// 8-byte positions and times, and the pgoutput message, whose first byte is its type.)
	d = pgrepl.NewDecoder(target)
	var refused bool
	for _, p := range payloads {
		if p[25] == 'R' {
			continue
		}
		if _, _, err := d.Decode(p); err != nil {
			refused = p[25] == 'I'
			break
		}
	}
	if !refused {
		t.Fatal("an insert before its relation message was not refused")
	}
}

// capturedPayloads returns the CopyData payloads of testdata/capture.json and its target.
func capturedPayloads(t *testing.T) (pgrepl.Target, [][]byte) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "capture.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c capture
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	var payloads [][]byte
	for _, m := range c.Messages {
		p, err := hex.DecodeString(m)
		if err != nil {
			t.Fatal(err)
		}
		payloads = append(payloads, p)
	}
	return c.Target, payloads
}

// TestDecodeRefusesTruncatedInserts decodes every prefix of the captured inserts that ends
// inside the pgoutput message: each is an error, never a panic or a row.
func TestDecodeRefusesTruncatedInserts(t *testing.T) {
	target, payloads := capturedPayloads(t)
	inserts := 0
	for i, p := range payloads {
		if p[25] != 'I' {
			continue
		}
		inserts++
		for n := 26; n < len(p); n++ {
			d := pgrepl.NewDecoder(target)
			for _, q := range payloads[:i] {
				if _, _, err := d.Decode(q); err != nil {
					t.Fatal(err)
				}
			}
			m, ok, err := d.Decode(p[:n:n])
			if err == nil {
				t.Fatalf("insert %d cut to %d of %d bytes: decoded %+v (ok %v), want an error", inserts, n, len(p), m, ok)
			}
		}
	}
	if inserts != len(captureEvents()) {
		t.Fatalf("the capture has %d inserts, want %d", inserts, len(captureEvents()))
	}
}

// TestRelationRefusesAColumnOfAnotherType changes the type of the captured relation's payload
// column to text: the relation message is refused with an error naming the column.
func TestRelationRefusesAColumnOfAnotherType(t *testing.T) {
	target, payloads := capturedPayloads(t)
	d := pgrepl.NewDecoder(target)
	for _, p := range payloads {
		if p[25] != 'R' {
			continue
		}
		p = append([]byte(nil), p...)
		// A column is its flags, its name (NUL-terminated), its type OID and its type modifier.
		at := bytes.Index(p, []byte("\x00payload\x00"))
		if at < 0 {
			t.Fatal("no payload column in the captured relation message")
		}
		binary.BigEndian.PutUint32(p[at+len("\x00payload\x00"):], 25) // text
		_, _, err := d.Decode(p)
		if err == nil || !strings.Contains(err.Error(), `column "payload"`) || !strings.Contains(err.Error(), "not bytea") {
			t.Fatalf("a text payload column: %v, want an error naming the column and its type", err)
		}
		return
	}
	t.Fatal("no relation message in the capture")
}

// receiveTransaction returns the stream's XLogData payloads up to the first commit.
func receiveTransaction(ctx context.Context, t *testing.T, conn *pgrepl.Conn) [][]byte {
	t.Helper()
	var out [][]byte
	for {
		msg, err := conn.ReceiveMessage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cd, ok := msg.(*pgproto3.CopyData)
		if !ok || len(cd.Data) < 26 || cd.Data[0] != 'w' {
			continue // keepalives
		}
		out = append(out, append([]byte(nil), cd.Data...))
		if cd.Data[25] == 'C' {
			return out
		}
	}
}

// decode decodes the payloads in order, failing the test on an error.
func decode(t *testing.T, d *pgrepl.Decoder, payloads [][]byte) []pgrepl.Message {
	t.Helper()
	var out []pgrepl.Message
	for _, p := range payloads {
		m, ok, err := d.Decode(p)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			out = append(out, m)
		}
	}
	return out
}

// checkTransaction checks the decoded transaction: Begin, the inserts of captureEvents, Commit.
func checkTransaction(t *testing.T, msgs []pgrepl.Message) {
	t.Helper()
	var inserts []pgrepl.Row
	var begin pgrepl.Begin
	var commit pgrepl.Commit
	for _, m := range msgs {
		switch m := m.(type) {
		case pgrepl.Begin:
			begin = m
		case pgrepl.Insert:
			inserts = append(inserts, m.Row)
		case pgrepl.Commit:
			commit = m
		}
	}
	if begin.Xid == 0 || begin.FinalLSN == 0 || commit.EndLSN < begin.FinalLSN || commit.Time.IsZero() {
		t.Fatalf("begin %+v, commit %+v", begin, commit)
	}
	want := captureEvents()
	if len(inserts) != len(want) {
		t.Fatalf("decoded %d inserts, want %d", len(inserts), len(want))
	}
	for i, r := range inserts {
		e, w := r.Event, want[i]
		if e.ID != w.ID || e.Topic != w.Topic || e.AggregateType != w.AggregateType || e.AggregateID != w.AggregateID ||
			e.EventType != w.EventType || e.TenantID != w.TenantID || string(e.Payload) != string(w.Payload) ||
			len(e.Headers) != len(w.Headers) || e.Headers["trace"] != w.Headers["trace"] {
			t.Errorf("insert %d: got %+v, want %+v", i, e, w)
		}
		if r.Seq <= 0 || r.Partition < 0 || r.Partition >= outbox.Partitions || r.Attempts != 0 || e.CreatedAt.Year() < 2025 ||
			e.CreatedAt.After(time.Now().Add(time.Minute)) || e.CreatedAt.Location() != time.UTC ||
			r.KeyHash != outbox.KeyHash(w.TenantID, w.AggregateType, w.AggregateID) {
			t.Errorf("insert %d: row %+v", i, r)
		}
		if i > 0 && r.Seq <= inserts[i-1].Seq {
			t.Errorf("insert %d: seq %d after %d", i, r.Seq, inserts[i-1].Seq)
		}
	}
}

// TestDecodeRefusesEveryTruncatedMessage decodes every prefix of every captured message (begin,
// relation, inserts, commit) that ends inside its pgoutput message, the empty one included:
// each is an error, never a panic.
func TestDecodeRefusesEveryTruncatedMessage(t *testing.T) {
	target, payloads := capturedPayloads(t)
	kinds := map[byte]int{}
	for i, p := range payloads {
		if p[0] != 'w' {
			continue
		}
		kinds[p[25]]++
		for n := 25; n < len(p); n++ {
			d := pgrepl.NewDecoder(target)
			for _, q := range payloads[:i] {
				if _, _, err := d.Decode(q); err != nil {
					t.Fatal(err)
				}
			}
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("message %q cut to %d of %d bytes: panic %v", p[25], n, len(p), r)
					}
				}()
				if m, ok, err := d.Decode(p[:n:n]); err == nil {
					t.Fatalf("message %q cut to %d of %d bytes: decoded %+v (ok %v), want an error", p[25], n, len(p), m, ok)
				}
			}()
		}
	}
	for _, kind := range []byte("BRIC") {
		if kinds[kind] == 0 {
			t.Fatalf("the capture has no %q message (%v)", kind, kinds)
		}
	}
}
