package adminapi

import (
	"time"

	"github.com/outboxkit/outboxkit/forwarder/admin"
)

// RelaysView is the relays of every lease group and their leases.
type RelaysView struct {
	Relays []RelayView   `json:"relays"`
	Leases []LeaseGroups `json:"lease_groups"`
}

// RelayView is one relay.
type RelayView struct {
	LeaseGroup    string     `json:"lease_group"`
	Owner         string     `json:"owner"`
	LastHeartbeat *time.Time `json:"last_heartbeat"`
	Partitions    []int      `json:"partitions"`
	Expired       []int      `json:"expired_partitions"`
	Epochs        int64      `json:"epochs"`
}

// LeaseGroups counts a group's partitions by state.
type LeaseGroups struct {
	LeaseGroup string `json:"lease_group"`
	Owned      int    `json:"owned"`
	Expired    int    `json:"expired"`
	Free       int    `json:"free"`
}

// SlotView is one cdc replication slot (the fields of `outboxkit cdc slots --json`).
type SlotView struct {
	Name                 string  `json:"name"`
	LeaseGroup           string  `json:"lease_group,omitempty"`
	Missing              bool    `json:"missing"`
	Active               bool    `json:"active"`
	ActivePID            int     `json:"active_pid,omitempty"`
	WALStatus            string  `json:"wal_status,omitempty"`
	LagBytes             int64   `json:"lag_bytes"`
	Drained              bool    `json:"drained"`
	WaitingRows          int64   `json:"waiting_rows"`
	OldestWaitingSeconds float64 `json:"oldest_waiting_seconds"`
	Publication          string  `json:"publication"`
}

// UnitView is one exactly-once transactional unit.
type UnitView struct {
	Unit       string          `json:"unit"`
	Owner      string          `json:"owner"`
	Checkpoint *CheckpointView `json:"checkpoint"`
	// CheckpointError says why the last checkpoint is not readable (the relays refuse the unit).
	CheckpointError string `json:"checkpoint_error,omitempty"`
}

// CheckpointView is a unit's last checkpoint.
type CheckpointView struct {
	Relay        string    `json:"relay"`
	Txn          int64     `json:"txn"`
	Time         time.Time `json:"time"`
	Published    int       `json:"published"`
	Dead         int       `json:"dead"`
	Installation string    `json:"installation"`
	Foreign      bool      `json:"foreign"`
}

// Relays returns the view of the relays and lease groups.
func Relays(relays []admin.RelayStatus, leases []admin.LeaseSummary) RelaysView {
	v := RelaysView{Relays: []RelayView{}, Leases: []LeaseGroups{}}
	for _, r := range relays {
		v.Relays = append(v.Relays, RelayView{LeaseGroup: r.LeaseGroup, Owner: r.Owner, LastHeartbeat: optionalTime(r.LastHeartbeat),
			Partitions: nonNil(r.Partitions), Expired: nonNil(r.Expired), Epochs: r.Epochs})
	}
	for _, l := range leases {
		v.Leases = append(v.Leases, LeaseGroups{LeaseGroup: l.LeaseGroup, Owned: l.Owned, Expired: l.Expired, Free: l.Free})
	}
	return v
}

// Slots returns the views of the cdc slots (never nil).
func Slots(slots []admin.SlotStatus) []SlotView {
	out := make([]SlotView, 0, len(slots))
	for _, s := range slots {
		out = append(out, SlotView{Name: s.Name, LeaseGroup: s.LeaseGroup, Missing: s.Missing, Active: s.Active, ActivePID: s.ActivePID,
			WALStatus: s.WALStatus, LagBytes: s.LagBytes, Drained: s.Drained, WaitingRows: s.Waiting,
			OldestWaitingSeconds: s.OldestWaiting.Seconds(), Publication: s.Publication})
	}
	return out
}

// Units returns the views of the transactional units (never nil).
func Units(units []admin.UnitStatus) []UnitView {
	out := make([]UnitView, 0, len(units))
	for _, u := range units {
		v := UnitView{Unit: u.Unit, Owner: u.Owner, CheckpointError: u.CheckpointError}
		if c := u.Checkpoint; c != nil {
			v.Checkpoint = &CheckpointView{Relay: c.Relay, Txn: c.Txn, Time: c.Time.UTC(), Published: c.Published, Dead: c.Dead,
				Installation: c.Installation, Foreign: c.Foreign}
		}
		out = append(out, v)
	}
	return out
}

func nonNil(v []int) []int {
	if v == nil {
		return []int{}
	}
	return v
}
