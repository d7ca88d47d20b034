package main

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/outboxkit/outboxkit/cmd/outboxkit/internal/adminapi"
	"github.com/outboxkit/outboxkit/forwarder/admin"
)

// filterFlags are the selection flags of the keys and dead-letters commands.
type filterFlags struct {
	topic, tenant, key, eventType, errText, group, since, until string
	events                                                      []string
	limit                                                       int
}

// register adds the flags; withText adds those blocked keys do not take (event type, error
// text, time range).
func (f *filterFlags) register(fs *pflag.FlagSet, withText bool) {
	fs.StringVar(&f.topic, "topic", "", "only events of this topic")
	fs.StringVar(&f.tenant, "tenant", "", "only events of this tenant (with --key: the key's tenant)")
	fs.StringVar(&f.key, "key", "", "only the events of this ordering key: aggregate_type/aggregate_id (such as order/o-1)")
	fs.StringVar(&f.group, "group", "", "only the events of this failure group (the fingerprint that dead-letters groups prints)")
	fs.StringSliceVar(&f.events, "event", nil, "only these event ids (repeatable, or comma-separated)")
	if withText {
		fs.StringVar(&f.eventType, "type", "", "only events of this event type")
		fs.StringVar(&f.errText, "error", "", "only events whose last error contains this text (case-insensitive)")
		fs.StringVar(&f.since, "since", "", "only events created at or after this time: RFC 3339 (2026-01-02T15:04:05Z) or an age (90m, 2h)")
		fs.StringVar(&f.until, "until", "", "only events created before this time: RFC 3339 or an age (10m)")
	}
}

// narrowed reports whether any selection flag is set.
func (f *filterFlags) narrowed() bool {
	return f.topic != "" || f.tenant != "" || f.key != "" || f.eventType != "" || f.errText != "" || f.group != "" ||
		f.since != "" || f.until != "" || len(f.events) > 0
}

// eventFilter returns the filter the flags describe; a bad value is a usage error naming it.
func (f *filterFlags) eventFilter(now time.Time) (admin.EventFilter, error) {
	out := admin.EventFilter{Topic: f.topic, EventType: f.eventType, TenantID: f.tenant, ErrorContains: f.errText,
		Group: f.group, Limit: f.limit}
	var err error
	if f.key != "" {
		k, err := admin.ParseKey(f.tenant, f.key)
		if err != nil {
			return out, usageErr(fmt.Errorf("--key: %w", err))
		}
		out.Key = &k
	}
	if out.EventIDs, err = parseEventIDs(f.events); err != nil {
		return out, usageErr(fmt.Errorf("--event: %w", err))
	}
	if out.Since, err = adminapi.ParseWhen(f.since, now); err != nil {
		return out, usageErr(fmt.Errorf("--since: %w", err))
	}
	if out.Until, err = adminapi.ParseWhen(f.until, now); err != nil {
		return out, usageErr(fmt.Errorf("--until: %w", err))
	}
	return out, nil
}

// keyFilter returns the blocked-keys filter the flags describe.
func (f *filterFlags) keyFilter() (admin.KeyFilter, error) {
	ef, err := f.eventFilter(time.Now())
	if err != nil {
		return admin.KeyFilter{}, err
	}
	return admin.KeyFilter{Topic: ef.Topic, TenantID: ef.TenantID, Key: ef.Key, Group: ef.Group, EventIDs: ef.EventIDs,
		Limit: ef.Limit}, nil
}
