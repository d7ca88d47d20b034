package faultinject

import (
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"
)

// Pause is one SIGSTOP/SIGCONT of a relay.
type Pause struct {
	Slot    int           // relay slot
	RelayID string        // the paused process's relay id
	Length  time.Duration // from SIGSTOP to SIGCONT
	Owned   int           // partitions it owned at SIGSTOP
	// Caught says what the relay was doing at SIGSTOP, as the database saw its connections:
	// "in a transaction", "in a statement", or "idle" (no batch caught in the time allowed).
	Caught string
	// TakenOver says whether every partition it owned had another owner before SIGCONT;
	// Takeover is the time from SIGSTOP until then.
	TakenOver bool
	Takeover  time.Duration
	// Long marks a pause longer than 3 x LeaseTTL, whose takeover must be within the bound.
	Long bool

	stoppedAt, resumedAt time.Time
}

func (p Pause) String() string {
	s := fmt.Sprintf("%s (slot %d, %d partitions, %s) for %s: ", p.RelayID, p.Slot, p.Owned, p.Caught,
		p.Length.Round(100*time.Millisecond))
	if p.TakenOver {
		return s + "taken over after " + p.Takeover.Round(10*time.Millisecond).String()
	}
	return s + "not taken over"
}

// Result is what a run measured.
type Result struct {
	Broker   string
	Database string
	Delivery string
	Source   string
	Seed     uint64
	// Installations and OutboxTable are the deployment shape (Config.Installations, the table as
	// the relays were configured with it).
	Installations int
	OutboxTable   string
	// Schema is the registry encoding of the schema variant (Config.Schema), "" without.
	Schema string

	Committed  int // events in committed transactions
	RolledBack int // events in transactions rolled back on purpose
	Uncertain  int // events whose commit returned an error (outcome unknown; excluded from checks)
	// WriterAborts counts transactions that failed before COMMIT (a lost connection, a
	// deadlock); their events count as rolled back.
	WriterAborts int
	// WriterDeadlocks counts writer transactions the database aborted as a deadlock or a lock
	// wait timeout (reported, not a broken guarantee: the application would retry them).
	WriterDeadlocks int

	Messages        int   // messages read from the topic, duplicates included
	Delivered       int   // distinct committed events delivered
	Lost            int   // committed events never delivered
	LostBy          []int // Lost per installation (with several)
	Phantoms        int   // distinct rolled-back or unknown events delivered
	OrderViolations int   // first deliveries whose per-key sequence went backwards
	Duplicates      int   // deliveries beyond the first of an event
	Undecodable     int   // messages without an event id or with a bad payload
	DeadLettered    int   // rows left dead in the outbox
	Pending         int   // rows left pending in the outbox
	// Decoded counts the messages the consumer decoded through the registry (schema variant).
	Decoded int

	// Poison counts the committed poison events (Config.PoisonEvents); they are not in
	// Committed, Delivered or Lost. Each must be dead-lettered (PoisonDead: its row dead) or,
	// if the broker took it after all, published (PoisonPublished); PoisonStuck counts those
	// neither published nor dead at the end (PoisonPending of them still pending), and
	// PoisonOverBudget the dead ones that took more than MaxAttempts attempts.
	Poison, PoisonDead, PoisonPublished, PoisonStuck, PoisonPending, PoisonOverBudget int
	// In the schema variant, PoisonDeadLetters counts the dead poison events whose dead letter
	// was read from the dead-letter topic with the field path their payload breaks in its reason;
	// PoisonPathMissing those published, without a dead letter, or with one that does not name
	// the path.
	PoisonDeadLetters, PoisonPathMissing int
	// The scheduled variant (Config.Scheduled): Scheduled counts the committed scheduled events;
	// CancelledOwn and CancelledLater the cancels that committed with Changed, in the event's own
	// transaction or a later one; CancelReleased and CancelNotFound the later cancels that found
	// the event released or gone (it must arrive). The broken rules: OwnCancelMissed (a cancel in
	// the event's own transaction that did not find it scheduled), Early (copies produced before
	// their deliver_at), CancelledArrived, NotFoundLate (an event first produced after a cancel
	// reported it NotFound) and ScheduledLeft (rows still scheduled at the end).
	Scheduled, CancelledOwn, CancelledLater, CancelReleased, CancelNotFound int
	OwnCancelMissed, Early, CancelledArrived, NotFoundLate, ScheduledLeft   int
	// DueTogether counts the scheduled events checked for the rule "events of one key that come
	// due together go out in sequence order" (those sharing their key and deliver_at with
	// another); DueOrderViolations the events that arrived after a later one of their group.
	DueTogether, DueOrderViolations int
	// HeldBehindDead counts the events that waited behind a dead poison event of their key
	// until the run discarded it (then they must arrive like any other).
	HeldBehindDead int
	// The discard under load (Config.DiscardAt): DiscardedUnderLoad counts the dead poison
	// events discarded while the writers went on; ParkedKeysAtDiscard the keys with rows in
	// the outbox table just before (the wal source's parked keys), DeadKeysAtDiscard those of
	// them with a dead row, HeldAtDiscard the events held behind the dead rows.
	DiscardedUnderLoad, ParkedKeysAtDiscard, DeadKeysAtDiscard, HeldAtDiscard int
	// PoisonMaxAttempts is the most attempts any dead poison event took.
	PoisonMaxAttempts int
	// PoisonDeadAgain counts the poison events discarded under load that were dead in the
	// table again at the end (parked anew after their discard) and were discarded again; the
	// wal source's tombstones (schema v13) rule it out, so any fails the run.
	PoisonDeadAgain int
	// MaxAttempts is the relays' retry budget (forwarder.max_attempts).
	MaxAttempts int

	Effects          int // effect rows written through the inbox
	InboxDuplicates  uint64
	EffectViolations int // committed events with no effect or more than one
	// DeadlocksLogged counts the lines of the relays' logs reporting a deadlock (PostgreSQL
	// 40P01, MySQL 1213) or a lock wait timeout (MySQL 1205).
	DeadlocksLogged int
	DeadlockSamples []string

	Kills int
	// StreamerKills counts the kills aimed at the relay holding the leases (the wal source's
	// streaming relay).
	StreamerKills  int
	RelaySelfExits int // relay exits not caused by a kill (e.g. broker down at start)
	BrokerRestarts int
	DBCuts         int // relay connections terminated
	Pauses         []Pause
	// TakeoverBound is the bound the long pauses' takeovers are held to; SlowTakeovers counts
	// the long pauses whose partitions were not all taken over within it.
	TakeoverBound time.Duration
	SlowTakeovers int
	// Stalled counts (RunPause) events committed while a relay was paused, early enough for
	// the others to relay them, that had not arrived when it was resumed.
	Stalled int

	WriteDuration time.Duration
	Duration      time.Duration
	Samples       []string // a few examples of what went wrong
}

// Err reports a broken guarantee: a lost event, a phantom, an order violation, an event without
// exactly one effect, a poison event neither published nor dead-lettered within its budget (in
// the schema variant: not dead-lettered with its field path), an undecodable message, a
// deadlock logged by a relay, a paused relay whose
// partitions were not taken over in time, or events stalled behind a paused relay.
func (r Result) Err() error {
	var errs []string
	if r.Lost > 0 {
		errs = append(errs, fmt.Sprintf("%d committed events lost", r.Lost))
	}
	if r.Phantoms > 0 {
		errs = append(errs, fmt.Sprintf("%d phantom events", r.Phantoms))
	}
	if r.OrderViolations > 0 {
		errs = append(errs, fmt.Sprintf("%d per-key order violations", r.OrderViolations))
	}
	if r.EffectViolations > 0 {
		errs = append(errs, fmt.Sprintf("%d events without exactly one effect", r.EffectViolations))
	}
	if r.Delivery == "exactly_once" && r.Duplicates > 0 {
		errs = append(errs, fmt.Sprintf("%d duplicates under exactly-once delivery", r.Duplicates))
	}
	if r.PoisonStuck > 0 {
		errs = append(errs, fmt.Sprintf("%d poison events neither published nor dead-lettered (%d still pending)", r.PoisonStuck, r.PoisonPending))
	}
	if r.PoisonOverBudget > 0 {
		errs = append(errs, fmt.Sprintf("%d poison events dead-lettered after more than %d attempts", r.PoisonOverBudget, r.MaxAttempts))
	}
	if r.PoisonPathMissing > 0 {
		errs = append(errs, fmt.Sprintf("%d schema-breaking poison events not dead-lettered with their field path", r.PoisonPathMissing))
	}
	if r.PoisonDeadAgain > 0 {
		errs = append(errs, fmt.Sprintf("%d discarded poison events dead again (parked anew after their discard)", r.PoisonDeadAgain))
	}
	errs = append(errs, r.scheduledErrs()...)
	if r.Undecodable > 0 {
		errs = append(errs, fmt.Sprintf("%d undecodable messages", r.Undecodable))
	}
	if r.DeadlocksLogged > 0 {
		errs = append(errs, fmt.Sprintf("%d deadlocks or lock wait timeouts logged by the relays (%s)",
			r.DeadlocksLogged, strings.Join(r.DeadlockSamples, "; ")))
	}
	if r.SlowTakeovers > 0 {
		errs = append(errs, fmt.Sprintf("%d paused relays kept their partitions longer than %s", r.SlowTakeovers, r.TakeoverBound))
	}
	if r.Stalled > 0 {
		errs = append(errs, fmt.Sprintf("%d events stalled behind the paused relay", r.Stalled))
	}
	if len(errs) == 0 {
		return nil
	}
	if len(r.Samples) > 0 {
		errs = append(errs, "e.g. "+strings.Join(r.Samples, "; "))
	}
	return errors.New("faultinject: " + strings.Join(errs, ", "))
}

// Table renders the result as an aligned two-column table.
func (r Result) Table() string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	row := func(k string, v any) { fmt.Fprintf(tw, "%s\t%v\n", k, v) }
	row("broker", r.Broker)
	row("database", r.Database)
	row("delivery", r.Delivery)
	row("source", r.Source)
	if r.Installations > 1 || r.OutboxTable != "" {
		row("installations / table", fmt.Sprintf("%d / %s", r.Installations, r.OutboxTable))
	}
	if r.Schema != "" {
		row("schema", r.Schema+" (Confluent wire format, the real registry)")
	}
	row("events committed", r.Committed)
	row("events rolled back", r.RolledBack)
	row("commit outcome unknown", r.Uncertain)
	row("writer tx aborted (connection lost, deadlock)", r.WriterAborts)
	row("writer deadlocks / lock wait timeouts", r.WriterDeadlocks)
	row("messages consumed", r.Messages)
	row("delivered (distinct)", r.Delivered)
	row("lost", r.Lost)
	if r.LostBy != nil {
		row("lost per installation", fmt.Sprint(r.LostBy))
	}
	if r.Schema != "" {
		row("messages decoded through the registry", r.Decoded)
	}
	row("phantoms", r.Phantoms)
	row("order violations", r.OrderViolations)
	row("duplicates", r.Duplicates)
	row("effects", r.Effects)
	row("events without exactly 1 effect", r.EffectViolations)
	row("inbox duplicates skipped", r.InboxDuplicates)
	row("dead-lettered / pending rows", fmt.Sprintf("%d / %d", r.DeadLettered, r.Pending))
	if r.Poison > 0 {
		row("poison events: dead / published / stuck (pending)", fmt.Sprintf("%d: %d / %d / %d (%d)", r.Poison,
			r.PoisonDead, r.PoisonPublished, r.PoisonStuck, r.PoisonPending))
		row("poison dead after > max_attempts", fmt.Sprintf("%d (max_attempts %d)", r.PoisonOverBudget, r.MaxAttempts))
		if r.Schema != "" {
			row("poison dead letters naming the field path / not", fmt.Sprintf("%d / %d", r.PoisonDeadLetters, r.PoisonPathMissing))
		}
		row("poison dead: most attempts", r.PoisonMaxAttempts)
		row("events held behind them until discarded", r.HeldBehindDead)
		if r.DiscardedUnderLoad > 0 {
			row("discarded under load: poison / parked keys / dead keys / held events", fmt.Sprintf("%d / %d / %d / %d",
				r.DiscardedUnderLoad, r.ParkedKeysAtDiscard, r.DeadKeysAtDiscard, r.HeldAtDiscard))
			row("  of them dead again at the end (discarded again)", r.PoisonDeadAgain)
		}
	}
	if r.Scheduled > 0 {
		row("scheduled events committed", r.Scheduled)
		row("cancelled: own tx / later tx (Changed)", fmt.Sprintf("%d / %d", r.CancelledOwn, r.CancelledLater))
		row("later cancels: Released / NotFound (must arrive)", fmt.Sprintf("%d / %d", r.CancelReleased, r.CancelNotFound))
		row("produced before deliver_at", r.Early)
		row("cancelled but arrived", r.CancelledArrived)
		row("NotFound but produced after the cancel", r.NotFoundLate)
		row("own-tx cancels not Changed / rows left scheduled", fmt.Sprintf("%d / %d", r.OwnCancelMissed, r.ScheduledLeft))
		row("due together with one of their key: checked / out of seq order", fmt.Sprintf("%d / %d", r.DueTogether, r.DueOrderViolations))
	}
	row("deadlocks logged (relays)", r.DeadlocksLogged)
	row("relay SIGKILLs", r.Kills)
	if r.StreamerKills > 0 {
		row("  of the streaming relay", r.StreamerKills)
	}
	row("relay self-exits (restarted)", r.RelaySelfExits)
	row("broker restarts", r.BrokerRestarts)
	row("relay DB connections cut", r.DBCuts)
	long := 0
	for _, p := range r.Pauses {
		if p.Long {
			long++
		}
	}
	row("relay pauses (SIGSTOP/SIGCONT)", fmt.Sprintf("%d (%d longer than 3x lease TTL)", len(r.Pauses), long))
	for i, p := range r.Pauses {
		row(fmt.Sprintf("  pause %d", i+1), p)
	}
	if r.TakeoverBound > 0 {
		row("takeover bound / slow takeovers", fmt.Sprintf("%s / %d", r.TakeoverBound, r.SlowTakeovers))
	}
	if r.Stalled > 0 {
		row("events stalled behind the paused relay", r.Stalled)
	}
	row("write phase", r.WriteDuration.Round(100*time.Millisecond))
	row("total", r.Duration.Round(100*time.Millisecond))
	row("seed", r.Seed)
	_ = tw.Flush()
	return b.String()
}

// scheduledErrs reports the broken rules of the scheduled variant.
func (r Result) scheduledErrs() []string {
	var errs []string
	if r.Early > 0 {
		errs = append(errs, fmt.Sprintf("%d scheduled events produced before their deliver_at", r.Early))
	}
	if r.CancelledArrived > 0 {
		errs = append(errs, fmt.Sprintf("%d cancelled events arrived", r.CancelledArrived))
	}
	if r.NotFoundLate > 0 {
		errs = append(errs, fmt.Sprintf("%d events reported NotFound by a cancel but produced after it", r.NotFoundLate))
	}
	if r.OwnCancelMissed > 0 {
		errs = append(errs, fmt.Sprintf("%d cancels in the event's own transaction did not find it scheduled", r.OwnCancelMissed))
	}
	if r.ScheduledLeft > 0 {
		errs = append(errs, fmt.Sprintf("%d rows left scheduled", r.ScheduledLeft))
	}
	if r.DueOrderViolations > 0 {
		errs = append(errs, fmt.Sprintf("%d scheduled events due together with one of their key arrived out of sequence order", r.DueOrderViolations))
	}
	return errs
}
