package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/outboxkit/outboxkit/cmd/outboxkit/internal/relayconfig"
	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/forwarder/admin"
)

// walParkedShown bounds the parked keys status lists.
const walParkedShown = 20

// walSlotOf returns the replication slot the wal relay of cfg streams (forwarder.wal_slot, or
// the default derived from the table and lease group), or "" when its source is not wal.
func walSlotOf(cfg relayconfig.Config) string {
	f := cfg.Forwarder
	if forwarder.Source(f.Source) != forwarder.SourceWAL {
		return ""
	}
	if f.WALSlot != "" {
		return f.WALSlot
	}
	group := f.LeaseGroup
	if group == "" {
		group = forwarder.DefaultLeaseGroup(f.Tenants)
	}
	return forwarder.WALSlotName(cfg.Database.Table, group)
}

// printWAL prints the wal source's section of status: the slot, the positions and the parked
// keys (ages taken at now).
func printWAL(w io.Writer, st admin.WALStatus, now time.Time) error {
	fmt.Fprintln(w)
	state := "idle (no relay streams it)"
	if st.Active {
		state = fmt.Sprintf("streaming (walsender PID %d)", st.ActivePID)
	}
	usable := "usable"
	switch {
	case st.Lost():
		usable = "LOST: writers are refused (outboxkit wal-slot show " + st.Slot + ")"
	case !st.Registered:
		usable = "NOT REGISTERED: writers are refused until a relay or outboxkit wal-slot create registers it"
	}
	fmt.Fprintf(w, "wal slot %s: %s, %s, wal_status %s\n", st.Slot, state, usable, orDash(st.WALStatus))
	fmt.Fprintf(w, "  server at %s, confirmed %s (lag %s)", st.ServerLSN, orDash(st.ConfirmedLSN), formatBytes(st.LagBytes))
	if st.RelayLSN != "" {
		fmt.Fprintf(w, ", relay published up to %s (reported %s ago)", st.RelayLSN, formatAge(now.Sub(st.RelayReportedAt)))
	}
	fmt.Fprintln(w)
	if st.ParkedKeys == 0 {
		_, err := fmt.Fprintln(w, "  parked keys: none")
		return err
	}
	fmt.Fprintf(w, "  parked keys: %d", st.ParkedKeys)
	if int64(len(st.Parked)) < st.ParkedKeys {
		fmt.Fprintf(w, " (the oldest %d)", len(st.Parked))
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  KEY\tROWS\tDEAD\tOLDEST")
	for _, k := range st.Parked {
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%s\n", k.Key, k.Rows, k.Dead, formatAge(now.Sub(k.Oldest)))
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
