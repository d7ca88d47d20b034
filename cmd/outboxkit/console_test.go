package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// browser starts headless Chromium (Debian's chromium package) for the test; without it the
// test is skipped, or fails under CI=true.
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if testsupport.InCI() {
			t.Fatalf("chromium is not installed (apt-get install -y chromium): %v", err)
		}
		t.Skip("chromium is not installed (apt-get install -y chromium)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 800), chromedp.Flag("disable-dev-shm-usage", true))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// page runs browser actions with a bound against hangs (not a timing assertion).
func page(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// text returns the text of the first element matching the CSS selector.
func readText(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	// Right after a navigation, chromedp may still hold the old document's execution context
	// ("Cannot find context with specified id"): ask again until the new one answers.
	for {
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err == nil {
			return s
		}
		if ctx.Err() != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// screenshot saves the viewport as docs/console-<name>.png when OUTBOXKIT_TEST_UPDATE_SCREENSHOTS is
// set (a run that refreshes the documentation), else into the test's temporary directory.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	dir := t.TempDir()
	if os.Getenv("OUTBOXKIT_TEST_UPDATE_SCREENSHOTS") != "" {
		dir = filepath.Join("..", "..", "docs")
	}
	if err := os.WriteFile(filepath.Join(dir, "console-"+name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// The web console in headless Chromium against a relay with real traffic and a dead-lettered
// event: log in, load every view, skip the dead key's head through the page (a dry run, then
// the confirmation), discard it from its detail page, and check the DOM and the database.
func TestConsoleInChromium(t *testing.T) {
	t.Parallel()
	r := startAdminRelay(t, "console")
	ctx := browser(t)
	base := "http://" + r.addr
	var text string
	page(t, ctx, "log in",
		chromedp.Navigate(base+"/console/keys"),
		chromedp.WaitVisible(chromedp.CSS(`#login`)),
		chromedp.SendKeys(chromedp.CSS(`input[name=token]`), writeToken),
		chromedp.Submit(chromedp.CSS(`#login`)),
		chromedp.WaitVisible(chromedp.CSS(`#keys`)))
	text = readText(t, ctx, `#keys`)
	if !strings.Contains(text, "order/order-big") || !strings.Contains(text, "dead") || !strings.Contains(text, r.big.ID.String()) {
		t.Fatalf("blocked keys page after the login: %q", text)
	}
	screenshot(t, ctx, "keys")
	page(t, ctx, "backlog", chromedp.Navigate(base+"/console/backlog"), chromedp.WaitVisible(chromedp.CSS(`#topics`)))
	text = readText(t, ctx, `#topics`)
	if !strings.Contains(text, r.topic) {
		t.Errorf("backlog page lacks the topic %s: %q", r.topic, text)
	}
	screenshot(t, ctx, "backlog")
	page(t, ctx, "relays", chromedp.Navigate(base+"/console/relays"), chromedp.WaitVisible(chromedp.CSS(`#relays`)))
	text = readText(t, ctx, `#relays`)
	if !strings.Contains(text, "default") || !strings.Contains(text, "64") {
		t.Errorf("relays page: %q", text)
	}
	page(t, ctx, "groups", chromedp.Navigate(base+"/console/groups"), chromedp.WaitVisible(chromedp.CSS(`#groups`)))
	text = readText(t, ctx, `#groups`)
	if !strings.Contains(text, "message_max_bytes <n>") {
		t.Errorf("groups page: %q", text)
	}
	screenshot(t, ctx, "groups")
	page(t, ctx, "dead letter", chromedp.Navigate(base+"/console/dead-letters"), chromedp.WaitVisible(chromedp.CSS(`#letters`)),
		chromedp.Click(chromedp.CSS(`a[href="/console/dead-letters/`+r.big.ID.String()+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#event`)))
	text = readText(t, ctx, `#state`)
	if text != "dead" {
		t.Errorf("dead letter page: state %q", text)
	}
	page(t, ctx, "payload")
	text = readText(t, ctx, `#payload`)
	if !strings.Contains(text, "20480 bytes") {
		t.Errorf("dead letter page: payload %q", text)
	}
	screenshot(t, ctx, "dead-letter")
	consoleActions(t, ctx, r, base)
}

// consoleActions skips the dead key's head from the keys page (dry run, then confirm), discards
// its failure group (dry run, a new dead letter of the group, confirm), then discards that new
// dead letter from its page.
func consoleActions(t *testing.T, ctx context.Context, r *adminRelay, base string) {
	t.Helper()
	var text string
	page(t, ctx, "skip dry run", chromedp.Navigate(base+"/console/keys"), chromedp.WaitVisible(chromedp.CSS(`#keys`)),
		chromedp.Click(chromedp.CSS(`tr[data-key="order/order-big"] form[action="/console/actions/skip"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`#summary.dry`)))
	text = readText(t, ctx, `#summary`)
	if !strings.Contains(text, "Dry run: skip would touch 1 events") {
		t.Fatalf("skip dry run page: %q", text)
	}
	if st := r.status(t, r.big.ID); st != 2 {
		t.Fatalf("the dry run changed the dead letter: status %d", st)
	}
	screenshot(t, ctx, "dry-run")
	page(t, ctx, "skip confirm", chromedp.Click(chromedp.CSS(`#confirm button`)),
		chromedp.WaitVisible(chromedp.CSS(`#summary.done`)))
	text = readText(t, ctx, `#summary`)
	if !strings.Contains(text, "Done: skip changed 1 of 1 events") {
		t.Fatalf("skip page: %q", text)
	}
	if st := r.status(t, r.big.ID); st != 3 {
		t.Errorf("after the skip: the head has status %d, want 3 (skipped)", st)
	}
	for deadline := time.Now().Add(time.Minute); r.status(t, r.later.ID) != -1 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	if st := r.status(t, r.later.ID); st != -1 {
		t.Errorf("the later event of the skipped key was not published: status %d", st)
	}
	// A confirmed dry run touches the events it listed only: a dead letter of the group that
	// appears between the dry run and the confirmation stays.
	page(t, ctx, "discard group dry run", chromedp.Navigate(base+"/console/groups"), chromedp.WaitVisible(chromedp.CSS(`#groups`)),
		chromedp.Click(chromedp.CSS(`#groups form[action="/console/actions/discard"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`#summary.dry`)))
	if text = readText(t, ctx, `#summary`); !strings.Contains(text, "Dry run: discard would touch 1 events") {
		t.Fatalf("discard group dry run page: %q", text)
	}
	newcomer := r.addDeadLetter(t, "", "order-new", r.big.ID)
	page(t, ctx, "discard group confirm", chromedp.Click(chromedp.CSS(`#confirm button`)),
		chromedp.WaitVisible(chromedp.CSS(`#summary.done`)))
	text = readText(t, ctx, `#summary`)
	if !strings.Contains(text, "Done: discard changed 1 of 1 events") || r.status(t, r.big.ID) != -1 || r.status(t, newcomer) != 2 {
		t.Errorf("discard of the group confirmed: %q; the listed event has status %d (want -1, gone), the newcomer %d (want 2, untouched)",
			text, r.status(t, r.big.ID), r.status(t, newcomer))
	}
	page(t, ctx, "discard", chromedp.Navigate(base+"/console/dead-letters/"+newcomer.String()), chromedp.WaitVisible(chromedp.CSS(`#event`)),
		chromedp.Click(chromedp.CSS(`form[action="/console/actions/discard"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm`)), chromedp.Click(chromedp.CSS(`#confirm button`)),
		chromedp.WaitVisible(chromedp.CSS(`#summary.done`)))
	text = readText(t, ctx, `#summary`)
	if !strings.Contains(text, "Done: discard changed 1 of 1 events") || r.status(t, newcomer) != -1 {
		t.Errorf("discard from the event page: %q, status %d", text, r.status(t, newcomer))
	}
	// A read token may look, not act.
	page(t, ctx, "read token", chromedp.Navigate(base+"/console/keys"), chromedp.Click(chromedp.CSS(`header form button`)),
		chromedp.WaitVisible(chromedp.CSS(`#login`)), chromedp.SendKeys(chromedp.CSS(`input[name=token]`), readToken),
		chromedp.Submit(chromedp.CSS(`#login`)), chromedp.WaitVisible(chromedp.CSS(`#topics`)))
	status, err := chromedp.Run(ctx, chromedp.Evaluate[string](`fetch("/console/actions/replay", {method: "POST", `+
		`body: new URLSearchParams({all: "1", dry_run: "1"})}).then(r => String(r.status))`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if status != "403" {
		t.Errorf("an action with a read token through the console: %s, want 403", status)
	}
}
