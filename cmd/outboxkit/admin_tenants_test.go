package main

import (
	"testing"

	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/cmd/outboxkit/internal/adminapi"
)

// A relay configured for one tenant serves that tenant's events only: its admin API lists
// neither another tenant's dead letters nor their events, and its actions by filter or on
// everything (dry run or not) leave them alone.
func TestAdminAPITenantScope(t *testing.T) {
	t.Parallel()
	r := launchAdminRelay(t, "tenants", "  tenants: [tenant-a]\n")
	mine := r.addDeadLetter(t, "tenant-a", "order-a", r.big.ID)
	theirs := r.addDeadLetter(t, "tenant-b", "order-b", r.big.ID)
	var letters []adminapi.EventView
	if code := r.call(t, "GET", "/api/v1/dead-letters", readToken, nil, &letters); code != 200 || len(letters) != 1 ||
		letters[0].EventID != mine.String() {
		t.Errorf("dead letters of a relay for tenant-a: %d %+v, want only %s", code, letters, mine)
	}
	if code := r.call(t, "GET", "/api/v1/dead-letters?tenant=tenant-b", readToken, nil, &letters); code != 200 || len(letters) != 0 {
		t.Errorf("tenant-b's dead letters through a relay for tenant-a: %d %+v, want none", code, letters)
	}
	if code := r.call(t, "GET", "/api/v1/dead-letters/"+theirs.String(), readToken, nil, nil); code != 404 {
		t.Errorf("tenant-b's event through a relay for tenant-a: %d, want 404", code)
	}
	var keys []adminapi.BlockedKeyView
	if code := r.call(t, "GET", "/api/v1/keys", readToken, nil, &keys); code != 200 || len(keys) != 1 || keys[0].Head.EventID != mine.String() {
		t.Errorf("blocked keys of a relay for tenant-a: %d %+v", code, keys)
	}
	var backlog []adminapi.TopicView
	if code := r.call(t, "GET", "/api/v1/backlog", readToken, nil, &backlog); code != 200 || len(backlog) != 1 || backlog[0].Dead != 1 ||
		backlog[0].Pending != 0 {
		t.Errorf("backlog of a relay for tenant-a: %d %+v, want 1 dead and none of the other tenants' pending", code, backlog)
	}
	var res adminapi.ActionView
	for _, sel := range []adminapi.Selection{{Tenant: "tenant-b"}, {EventIDs: []string{theirs.String()}}} {
		if code := r.call(t, "POST", "/api/v1/actions/discard", writeToken, sel, &res); code != 200 || res.Matched != 0 || res.Applied != 0 {
			t.Errorf("discard %+v through a relay for tenant-a: %d %+v, want nothing matched", sel, code, res)
		}
	}
	if code := r.call(t, "POST", "/api/v1/actions/skip", writeToken, adminapi.Selection{All: true}, &res); code != 200 || res.Applied != 1 {
		t.Errorf("skip all: %d %+v, want tenant-a's head only", code, res)
	}
	if code := r.call(t, "POST", "/api/v1/actions/discard", writeToken, adminapi.Selection{All: true}, &res); code != 200 || res.Applied != 1 {
		t.Errorf("discard all: %d %+v, want tenant-a's dead letter only", code, res)
	}
	for id, want := range map[uuid.UUID]int{mine: -1, theirs: 2, r.big.ID: 0} {
		if st := r.status(t, id); st != want {
			t.Errorf("event %s: status %d, want %d", id, st, want)
		}
	}
}
