package relay

import (
	"context"

	"github.com/ThreeDotsLabs/watermill/message"
)

// Messages turns records into broker messages carrying ctx.
func Messages(ctx context.Context, records []Record) []*message.Message {
	msgs := make([]*message.Message, len(records))
	for i, r := range records {
		msgs[i] = r.Event.ToMessage()
		msgs[i].SetContext(ctx)
	}
	return msgs
}
