package forwarder

import "github.com/outboxkit/outboxkit/forwarder/internal/wal"

// WithWALHooks returns c with the wal source's test hooks h.
func WithWALHooks(c Config, h *wal.Hooks) Config {
	c.walHooks = h
	return c
}
