package forwarder_test

import (
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/outbox"
)

// TestCDCStreamerThatLostItsLeasesLeavesRowsAlone: a running streamer's publish of a part hangs;
// meanwhile its leases are taken over (their epochs incremented, as a new streamer's takeover
// does); then the publish fails. The acknowledgement is fenced off, and so must the retry mark
// be: the row stays pending and unmarked, the new owner's to stream. (Unfenced, the old streamer
// marked it, and the new streamer's retry path published it a second time.)
func TestCDCStreamerThatLostItsLeasesLeavesRowsAlone(t *testing.T) {
	h := newCDCHarness(t, kfakeBrokers(t))
	ev := h.event("x", 0)
	pub := &hangThenFail{Publisher: h.publisher(), id: ev.ID.String(), hanging: make(chan struct{}), release: make(chan struct{})}
	defer pub.unhang()
	var logs logSink
	cfg := h.config(pub)
	cfg.LeaseTTL = 20 * time.Second // bounds a publish: longer than the hang
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	h.start(cfg)
	h.waitForStream()
	h.write(ev)
	select {
	case <-pub.hanging:
	case <-time.After(2 * time.Minute): // a bound against a hang
		t.Fatal("the event was not published within 2 minutes")
	}
	if _, err := h.db.Exec("UPDATE " + h.writer.Table().Leases() + " SET owner = 'successor', epoch = epoch + 1," +
		" expires_at = clock_timestamp() + interval '1 hour' WHERE lease_group = 'default'"); err != nil {
		t.Fatal(err)
	}
	pub.unhang()
	deadline := time.Now().Add(2 * time.Minute)
	for logs.line("lost the lease of partitions during a batch") == "" {
		if time.Now().After(deadline) {
			t.Fatal("the streamer did not report its fenced acknowledgement within 2 minutes")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The mark, if any, follows the acknowledgement at once.
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		var marked bool
		var status, attempts int
		if err := h.db.QueryRow("SELECT next_attempt_at IS NOT NULL, status, attempts FROM "+h.writer.Table().Events()+
			" WHERE event_id = $1", ev.ID).Scan(&marked, &status, &attempts); err != nil {
			t.Fatal(err)
		}
		if marked || status != 0 || attempts != 0 {
			t.Fatalf("the streamer whose leases were taken over changed the row: marked %v, status %d, attempts %d", marked, status, attempts)
		}
	}
}

// hangThenFail makes the first call carrying event id hang until unhang, then fail; it
// delivers every other call.
type hangThenFail struct {
	message.Publisher
	id       string
	once     sync.Once
	hanging  chan struct{}
	release  chan struct{}
	released sync.Once
}

func (p *hangThenFail) unhang() { p.released.Do(func() { close(p.release) }) }

func (p *hangThenFail) Publish(topic string, msgs ...*message.Message) error {
	for _, m := range msgs {
		if m.Metadata.Get(outbox.MetadataEventID) != p.id {
			continue
		}
		first := false
		p.once.Do(func() { first = true })
		if first {
			close(p.hanging)
			<-p.release
			return errors.New("injected: the broker refused the message after a long wait")
		}
	}
	return p.Publisher.Publish(topic, msgs...)
}
