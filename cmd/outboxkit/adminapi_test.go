package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/cmd/outboxkit/internal/adminapi"
)

// The admin API of a running relay: bearer tokens with scopes, the read views, and the actions
// with a dry run, audited in the relay's log; the dead key's later event flows after a discard.
func TestAdminAPI(t *testing.T) {
	t.Parallel()
	r := startAdminRelay(t, "api")
	// The start-up line shows the effective forwarder and log sections, and the listener opens
	// before the broker connects.
	start := r.relay.waitLog(t, "outboxkit relay starting")
	config, _ := start["config"].(map[string]any)
	fwd, _ := config["forwarder"].(map[string]any)
	if fwd["max_attempts"] != float64(3) || config["log.format"] != "json" || config["http.admin_write_tokens_file"] != "write.tokens" {
		t.Errorf("start-up configuration line: %v", start)
	}
	if log := r.relay.log(); strings.Index(log, "serving /metrics and /healthz") > strings.Index(log, "broker ready") {
		t.Errorf("the HTTP listener opened after the broker connected:\n%s", log)
	}
	for _, c := range []struct{ token string }{{""}, {"not-a-token-at-all-really"}} {
		if code := r.call(t, "GET", "/api/v1/keys", c.token, nil, nil); code != http.StatusUnauthorized {
			t.Errorf("GET /api/v1/keys with token %q: %d, want 401", c.token, code)
		}
	}
	var backlog []adminapi.TopicView
	if code := r.call(t, "GET", "/api/v1/backlog", readToken, nil, &backlog); code != 200 || len(backlog) != 1 || backlog[0].Dead != 1 {
		t.Errorf("backlog: %d %+v", code, backlog)
	}
	var relays adminapi.RelaysView
	if code := r.call(t, "GET", "/api/v1/relays", readToken, nil, &relays); code != 200 || len(relays.Relays) != 1 ||
		len(relays.Relays[0].Partitions) != 64 || len(relays.Leases) != 1 || relays.Leases[0].Owned != 64 {
		t.Errorf("relays: %d %+v", code, relays)
	}
	var slots []adminapi.SlotView
	if code := r.call(t, "GET", "/api/v1/slots", readToken, nil, &slots); code != 200 || len(slots) != 0 {
		t.Errorf("slots of a polling relay: %d %+v", code, slots)
	}
	if code := r.call(t, "GET", "/api/v1/units", readToken, nil, nil); code != http.StatusNotFound {
		t.Errorf("units of an at-least-once relay: %d, want 404", code)
	}
	var keys []adminapi.BlockedKeyView
	if code := r.call(t, "GET", "/api/v1/keys?topic="+r.topic, readToken, nil, &keys); code != 200 || len(keys) != 1 ||
		keys[0].Head.EventID != r.big.ID.String() || keys[0].State != "dead" || keys[0].Waiting != 1 {
		t.Fatalf("keys: %d %+v", code, keys)
	}
	var letters []adminapi.EventView
	if code := r.call(t, "GET", "/api/v1/dead-letters?error=message_max_bytes&since=1h", readToken, nil, &letters); code != 200 || len(letters) != 1 {
		t.Errorf("dead-letters?error=: %d %+v", code, letters)
	}
	var detail adminapi.EventDetailView
	if code := r.call(t, "GET", "/api/v1/dead-letters/"+r.big.ID.String(), readToken, nil, &detail); code != 200 ||
		len(detail.PayloadBase64) != len(r.big.Payload) || !strings.Contains(detail.LastError, "message_max_bytes") {
		t.Errorf("dead letter detail: %d, payload %d bytes, error %q", code, len(detail.PayloadBase64), detail.LastError)
	}
	if code := r.call(t, "GET", "/api/v1/dead-letters/not-an-id", readToken, nil, nil); code != http.StatusBadRequest {
		t.Errorf("dead letter with a bad id: %d, want 400", code)
	}
	var groups []adminapi.GroupView
	if code := r.call(t, "GET", "/api/v1/groups", readToken, nil, &groups); code != 200 || len(groups) != 1 || groups[0].DeadLetters != 1 {
		t.Fatalf("groups: %d %+v", code, groups)
	}
	checkAPIActions(t, r, groups[0].Fingerprint)
}

func checkAPIActions(t *testing.T, r *adminRelay, group string) {
	t.Helper()
	sel := adminapi.Selection{Group: group, DryRun: true}
	if code := r.call(t, "POST", "/api/v1/actions/discard", readToken, sel, nil); code != http.StatusForbidden {
		t.Errorf("an action with a read token: %d, want 403", code)
	}
	if code := r.call(t, "POST", "/api/v1/actions/discard", writeToken, adminapi.Selection{}, nil); code != http.StatusBadRequest {
		t.Errorf("an action selecting nothing: %d, want 400", code)
	}
	var res adminapi.ActionView
	if code := r.call(t, "POST", "/api/v1/actions/discard", writeToken, sel, &res); code != 200 || !res.DryRun || res.Matched != 1 ||
		res.Applied != 0 || res.Events[0].EventID != r.big.ID.String() {
		t.Fatalf("discard dry run: %d %+v", code, res)
	}
	if st := r.status(t, r.big.ID); st != 2 {
		t.Fatalf("the dry run changed the dead letter: status %d", st)
	}
	// Confirming with the dry run's event ids touches those only: a dead letter of the group
	// that appeared since stays, until an action by filter takes it.
	newcomer := r.addDeadLetter(t, "", "order-new", r.big.ID)
	byID := adminapi.Selection{EventIDs: []string{res.Events[0].EventID}, Group: group}
	if code := r.call(t, "POST", "/api/v1/actions/discard", writeToken, byID, &res); code != 200 || res.Applied != 1 ||
		res.Matched != 1 || res.Listed != 1 {
		t.Fatalf("discard of the listed ids: %d %+v", code, res)
	}
	if big, st := r.status(t, r.big.ID), r.status(t, newcomer); big != -1 || st != 2 {
		t.Fatalf("after the discard of the listed ids: the listed event has status %d (want -1), the newcomer %d (want 2, untouched)", big, st)
	}
	sel.DryRun = false
	var byFilter adminapi.ActionView
	if code := r.call(t, "POST", "/api/v1/actions/discard", writeToken, sel, &byFilter); code != 200 || byFilter.Applied != 1 ||
		byFilter.Listed != 0 || r.status(t, newcomer) != -1 {
		t.Fatalf("discard by group: %d %+v", code, byFilter)
	}
	deadline := time.Now().Add(time.Minute)
	for r.status(t, r.later.ID) != -1 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if st, big := r.status(t, r.later.ID), r.status(t, r.big.ID); st != -1 || big != -1 {
		t.Errorf("after the discard: the dead letter has status %d, the later event of its key %d; want both gone (discarded, published)", big, st)
	}
	audit := r.relay.waitLog(t, "admin action")
	if audit["who"] != "ops" || audit["action"] != "discard" || audit["via"] != "api" {
		t.Errorf("audit line: %v", audit)
	}
	if log := r.relay.log(); strings.Contains(log, writeToken) || strings.Contains(log, readToken) {
		t.Errorf("the relay log shows a token")
	}
}
