package middleware_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
)

// BenchmarkInboxHandler measures one delivery through Inbox.Handler (begin, inbox insert, one
// business insert, commit) and one duplicate delivery (begin, insert ignored, rollback) on each
// database, sequentially from one goroutine.
func BenchmarkInboxHandler(b *testing.B) {
	for _, d := range databases() {
		b.Run(d.name, func(b *testing.B) {
			f := newFixture(b, d)
			h := f.inbox.Handler(func(ctx context.Context, tx *sql.Tx, msg *message.Message) ([]*message.Message, error) {
				return nil, f.addEffect(ctx, tx, msg)
			})
			b.Run("new", func(b *testing.B) {
				for i := 0; b.Loop(); i++ {
					if _, err := h(eventMsg(fmt.Sprint("new-", i), "p")); err != nil {
						b.Fatal(err)
					}
				}
			})
			if _, err := h(eventMsg("dup", "p")); err != nil {
				b.Fatal(err)
			}
			b.Run("duplicate", func(b *testing.B) {
				for b.Loop() {
					if _, err := h(eventMsg("dup", "p")); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
