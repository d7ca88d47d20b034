package admin

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/outboxkit/outboxkit/outbox"
)

// RelayStatus is one relay of a lease group, as its heartbeats and leases record it.
type RelayStatus struct {
	LeaseGroup    string
	Owner         string
	LastHeartbeat time.Time
	// Partitions are the partitions it leases (unexpired or not: an expired lease is taken over
	// at the next heartbeat of another relay), Expired those whose lease has expired.
	Partitions []int
	Expired    []int
	// Epochs sums the lease epochs of its partitions: it grows with every takeover.
	Epochs int64
}

// LeaseSummary counts the partitions of a lease group by state.
type LeaseSummary struct {
	LeaseGroup string
	Owned      int
	Expired    int
	Free       int
}

// Relays returns the relays of every lease group of the table with their partitions, and a
// summary per group (a group whose 64 partitions are not all owned has work nobody does).
func (a *Admin) Relays(ctx context.Context) ([]RelayStatus, []LeaseSummary, error) {
	relays := map[[2]string]*RelayStatus{}
	rows, err := a.sql().Relays().Query(ctx, a.db)
	if err != nil {
		return nil, nil, fmt.Errorf("admin: read relays: %w", err)
	}
	for rows.Next() {
		r := &RelayStatus{}
		beat, getBeat := outbox.TimeScanner()
		if err := rows.Scan(&r.LeaseGroup, &r.Owner, beat); err != nil {
			rows.Close()
			return nil, nil, fmt.Errorf("admin: read relays: %w", err)
		}
		if r.LastHeartbeat, err = getBeat(); err != nil {
			rows.Close()
			return nil, nil, fmt.Errorf("admin: read relays: %w", err)
		}
		relays[[2]string{r.LeaseGroup, r.Owner}] = r
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("admin: read relays: %w", err)
	}
	summaries, err := a.readLeases(ctx, relays)
	if err != nil {
		return nil, nil, err
	}
	out := make([]RelayStatus, 0, len(relays))
	for _, r := range relays {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].LeaseGroup != out[j].LeaseGroup {
			return out[i].LeaseGroup < out[j].LeaseGroup
		}
		return out[i].Owner < out[j].Owner
	})
	return out, summaries, nil
}

// readLeases adds the leases to their relays (creating a relay that has leases but no
// heartbeat row) and summarizes them per group.
func (a *Admin) readLeases(ctx context.Context, relays map[[2]string]*RelayStatus) ([]LeaseSummary, error) {
	rows, err := a.sql().Leases().Query(ctx, a.db)
	if err != nil {
		return nil, fmt.Errorf("admin: read leases: %w", err)
	}
	defer rows.Close()
	groups := map[string]*LeaseSummary{}
	var order []string
	for rows.Next() {
		var (
			group, owner string
			partition    int
			expired      bool
			epoch        int64
		)
		if err := rows.Scan(&group, &partition, &owner, &expired, &epoch); err != nil {
			return nil, fmt.Errorf("admin: read leases: %w", err)
		}
		g := groups[group]
		if g == nil {
			g = &LeaseSummary{LeaseGroup: group}
			groups[group] = g
			order = append(order, group)
		}
		switch {
		case owner == "":
			g.Free++
			continue
		case expired:
			g.Expired++
		default:
			g.Owned++
		}
		r := relays[[2]string{group, owner}]
		if r == nil {
			r = &RelayStatus{LeaseGroup: group, Owner: owner}
			relays[[2]string{group, owner}] = r
		}
		r.Partitions = append(r.Partitions, partition)
		if expired {
			r.Expired = append(r.Expired, partition)
		}
		r.Epochs += epoch
	}
	out := make([]LeaseSummary, 0, len(order))
	for _, g := range order {
		out = append(out, *groups[g])
	}
	return out, rows.Err()
}
