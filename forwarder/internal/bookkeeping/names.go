package bookkeeping

import (
	"fmt"
	"sort"
	"strings"
)

// DefaultLeaseGroup is the lease group of relays of the given tenants that name none: "default"
// without tenants, otherwise "tenants:" and the sorted tenants, comma-separated.
func DefaultLeaseGroup(tenants []string) string {
	if len(tenants) == 0 {
		return "default"
	}
	sorted := append([]string(nil), tenants...)
	sort.Strings(sorted)
	return "tenants:" + strings.Join(sorted, ",")
}

// DefaultCheckpointTopic is the topic of the transactional units' checkpoints when the
// configuration names none.
const DefaultCheckpointTopic = "outboxkit.checkpoints"

// DefaultTransactionalIDPrefix names the transactional units of one installation, table and
// lease group.
func DefaultTransactionalIDPrefix(installation, table, group string) string {
	return "outboxkit/" + installation + "/" + table + "/" + group
}

// UnitName is the name of a transactional unit (its Kafka transactional.id): the prefix and the
// unit number, "<prefix>/uNN".
func UnitName(prefix string, unit int) string {
	return fmt.Sprintf("%s/u%02d", prefix, unit)
}
