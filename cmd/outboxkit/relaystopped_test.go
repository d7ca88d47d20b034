package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/outboxkit/outboxkit/forwarder"
)

// TestRelayStoppedKeepsARefusedUnitCount: a signal that arrives while a relay stops on its own
// refused unit count does not turn the refusal into a clean exit; a signal during a start that
// waits for the database does.
func TestRelayStoppedKeepsARefusedUnitCount(t *testing.T) {
	parent := context.Background()
	signalled, stop := context.WithCancel(parent)
	stop()
	logger := slog.New(slog.DiscardHandler)
	refused := fmt.Errorf("forwarder: stopped on table outbox_events: %w", forwarder.ErrUnitCountMismatch)
	if err := relayStopped(signalled, parent, refused, logger); !errors.Is(err, forwarder.ErrUnitCountMismatch) {
		t.Fatalf("relay stopped on a refused unit count, then signalled: %v, want ErrUnitCountMismatch", err)
	}
	if err := relayStopped(signalled, parent, errors.New("forwarder: start: database not ready"), logger); err != nil {
		t.Fatalf("relay signalled while waiting for the database: %v, want nil", err)
	}
	if err := relayStopped(parent, parent, refused, logger); !errors.Is(err, forwarder.ErrUnitCountMismatch) {
		t.Fatalf("relay stopped on a refused unit count: %v, want ErrUnitCountMismatch", err)
	}
}
