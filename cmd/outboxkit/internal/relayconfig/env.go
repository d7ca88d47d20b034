package relayconfig

import (
	"fmt"
	"strings"

	"github.com/outboxkit/outboxkit/brokers/brokerconfig"
	"github.com/outboxkit/outboxkit/cmd/outboxkit/internal/adminapi"
)

// Environment variables that override the database section (the broker part has brokerconfig's
// own, listed by brokerconfig.EnvNames).
const (
	EnvDatabaseDSN     = "OUTBOXKIT_DATABASE_DSN"
	EnvDatabaseDialect = "OUTBOXKIT_DATABASE_DIALECT"
	EnvDatabaseTable   = "OUTBOXKIT_DATABASE_TABLE"
	// EnvForwarderDelivery overrides forwarder.delivery.
	EnvForwarderDelivery = "OUTBOXKIT_FORWARDER_DELIVERY"
	// EnvForwarderSource overrides forwarder.source.
	EnvForwarderSource = "OUTBOXKIT_FORWARDER_SOURCE"
)

// The admin API's token variables (read by adminapi.LoadTokens), listed here so that AppliedEnv
// reports them with the other overrides.
const (
	EnvAdminReadTokens  = adminapi.EnvReadTokens
	EnvAdminWriteTokens = adminapi.EnvWriteTokens
)

// envKeys maps each of the CLI's own variables, in EnvNames' order, to the key it overrides
// (the admin token variables add to the tokens of a file rather than replace a key).
var envKeys = []struct{ name, key string }{
	{EnvDatabaseDialect, "database.dialect"},
	{EnvDatabaseDSN, "database.dsn"},
	{EnvDatabaseTable, "database.table"},
	{EnvForwarderDelivery, "forwarder.delivery"},
	{EnvForwarderSource, "forwarder.source"},
	{EnvAdminReadTokens, "http.admin_read_tokens_file"},
	{EnvAdminWriteTokens, "http.admin_write_tokens_file"},
}

// EnvNames returns the CLI's own environment variables (the broker part's are
// brokerconfig.EnvNames).
func EnvNames() []string {
	names := make([]string, len(envKeys))
	for i, e := range envKeys {
		names[i] = e.name
	}
	return names
}

// AppliedEnv returns the names of the variables lookupEnv reports set that the configuration
// reads: the CLI's own, then, with opts.Broker, the broker part's. Names only: the relay logs
// them at start, and values may be secrets. Variables the CLI does not read (such as those
// scripts/services.sh exports for the tests) are not listed.
func AppliedEnv(lookupEnv func(string) (string, bool), opts Options) []string {
	if lookupEnv == nil {
		return nil
	}
	set := []string{} // logged as [] rather than null when nothing is set
	for _, e := range envKeys {
		if _, ok := lookupEnv(e.name); ok {
			set = append(set, e.name)
		}
	}
	if opts.Broker {
		set = append(set, brokerconfig.AppliedEnv(lookupEnv)...)
	}
	return set
}

// nameEnvInError adds the variable to an error about a key that a set environment variable
// overrides ("OUTBOXKIT_X (key): key: ..."), since the file may not have the key at all.
func nameEnvInError(err error, lookupEnv func(string) (string, bool)) error {
	if err == nil || lookupEnv == nil {
		return err
	}
	msg := err.Error()
	for _, e := range envKeys {
		if _, ok := lookupEnv(e.name); ok && strings.HasPrefix(msg, e.key+":") {
			return fmt.Errorf("%s (%s): %w", e.name, e.key, err)
		}
	}
	return err
}
