// Package middleware is the consumer side of outboxkit: an idempotent consumer (Inbox) that turns
// redelivered events into a single database effect, and RetryThenPoison, Watermill's Retry and
// PoisonQueue middleware composed in the one order that works.
//
// The package name clashes with Watermill's own middleware package; import one of them under
// another name, for example:
//
//	import (
//		wmmiddleware "github.com/ThreeDotsLabs/watermill/message/router/middleware"
//		"github.com/outboxkit/outboxkit/middleware"
//	)
package middleware
