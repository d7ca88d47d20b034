package adminapi

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/outboxkit/outboxkit/forwarder/admin"
)

// defaultWALParked is how many parked keys GET /api/v1/wal lists without ?limit; maxWALParked
// bounds ?limit.
const (
	defaultWALParked = 100
	maxWALParked     = 10000
)

// WALView is the wal source's state (GET /api/v1/wal).
type WALView struct {
	Slot         string `json:"slot"`
	Registered   bool   `json:"registered"`
	Exists       bool   `json:"exists"`
	Usable       bool   `json:"usable"`
	Lost         bool   `json:"lost"`
	Active       bool   `json:"active"`
	ActivePID    int    `json:"active_pid,omitempty"`
	WALStatus    string `json:"wal_status,omitempty"`
	ServerLSN    string `json:"server_lsn"`
	ConfirmedLSN string `json:"confirmed_lsn,omitempty"`
	LagBytes     int64  `json:"lag_bytes"`
	// SafeWALBytes is set with max_slot_wal_keep_size only.
	SafeWALBytes    *int64          `json:"safe_wal_bytes,omitempty"`
	RelayLSN        string          `json:"relay_lsn,omitempty"`
	RelayReportedAt *time.Time      `json:"relay_reported_at,omitempty"`
	SentLSN         string          `json:"sent_lsn,omitempty"`
	ParkedKeys      int64           `json:"parked_keys"`
	Parked          []ParkedKeyView `json:"parked"`
}

// ParkedKeyView is a parked key of the wal source with its rows in the table.
type ParkedKeyView struct {
	Key    KeyView   `json:"key"`
	Rows   int64     `json:"rows"`
	Dead   int64     `json:"dead"`
	Oldest time.Time `json:"oldest"`
}

// WAL returns the view of the wal source's state.
func WAL(st admin.WALStatus) WALView {
	v := WALView{Slot: st.Slot, Registered: st.Registered, Exists: st.Exists, Usable: st.Usable(), Lost: st.Lost(),
		Active: st.Active, ActivePID: st.ActivePID, WALStatus: st.WALStatus, ServerLSN: st.ServerLSN,
		ConfirmedLSN: st.ConfirmedLSN, LagBytes: st.LagBytes, RelayLSN: st.RelayLSN, RelayReportedAt: optionalTime(st.RelayReportedAt),
		SentLSN: st.SentLSN, ParkedKeys: st.ParkedKeys, Parked: []ParkedKeyView{}}
	if st.SafeWALLimited {
		safe := st.SafeWALBytes
		v.SafeWALBytes = &safe
	}
	for _, k := range st.Parked {
		v.Parked = append(v.Parked, ParkedKeyView{Key: KeyView{TenantID: k.Key.TenantID, AggregateType: k.Key.AggregateType,
			AggregateID: k.Key.AggregateID}, Rows: k.Rows, Dead: k.Dead, Oldest: k.Oldest.UTC()})
	}
	return v
}

// wal serves GET /api/v1/wal[?limit=n]: 404 unless the relay's source is wal.
func (a *API) wal(r *http.Request) (any, error) {
	if a.cfg.WALSlot == "" {
		return nil, statusError{http.StatusNotFound, errors.New("the relay's source is not wal: it has no wal slot")}
	}
	limit := defaultWALParked
	if text := r.URL.Query().Get("limit"); text != "" {
		n, err := strconv.Atoi(text)
		if err != nil || n <= 0 || n > maxWALParked {
			return nil, InputError{fmt.Errorf("limit: %q is not a number from 1 to %d", text, maxWALParked)}
		}
		limit = n
	}
	st, err := a.cfg.Admin.WAL(r.Context(), a.cfg.WALSlot, limit)
	if err != nil {
		return nil, err
	}
	return WAL(st), nil
}
