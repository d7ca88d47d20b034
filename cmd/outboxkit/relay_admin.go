package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/cmd/outboxkit/internal/adminapi"
	"github.com/outboxkit/outboxkit/cmd/outboxkit/internal/console"
	"github.com/outboxkit/outboxkit/cmd/outboxkit/internal/relayconfig"
	"github.com/outboxkit/outboxkit/forwarder"
)

// adminRoutes returns what mounts the admin API (/api/v1/) and console (/console/) on a
// listener's routes when a token is configured, else nil (both off, never open). A token file that cannot be read, or a bad token, is a configuration error.
// publisher returns the broker's publisher once it is connected (nil before): the exactly-once
// units view reads the checkpoints through it.
func adminRoutes(cfg relayconfig.Config, db *sql.DB, publisher func() message.Publisher, logger *slog.Logger) (func(*http.ServeMux), error) {
	tokens, err := adminapi.LoadTokens(cfg.HTTP.AdminReadTokensFile, cfg.HTTP.AdminWriteTokensFile, os.LookupEnv)
	if err != nil {
		return nil, usageErr(fmt.Errorf("http: %w", err))
	}
	if tokens.Empty() {
		logger.Info("admin API and console off: no admin token configured (http.admin_read_tokens_file, http.admin_write_tokens_file)")
		return nil, nil
	}
	all, err := forwarder.NewAdmin(db, cfg.Database.Dialect, cfg.Database.Table)
	if err != nil {
		return nil, usageErr(err)
	}
	// The API and console show and act on the relay's tenants only, as it relays them.
	admin := all.ForTenants(cfg.Forwarder.Tenants...)
	acfg := adminapi.Config{Admin: admin, Tokens: tokens, Logger: logger.With("component", "admin"), SlotGroups: streamedGroups(cfg),
		Scrub: cfg.Scrubber()}
	if forwarder.Delivery(cfg.Forwarder.Delivery) == forwarder.ExactlyOnce {
		f := cfg.Forwarder
		group := f.LeaseGroup
		if group == "" {
			group = forwarder.DefaultLeaseGroup(f.Tenants)
		}
		q := forwarder.UnitsQuery{LeaseGroup: group, TransactionalIDPrefix: f.TransactionalIDPrefix, CheckpointTopic: f.CheckpointTopic}
		acfg.Units = func(ctx context.Context) ([]forwarder.UnitStatus, error) {
			reader, ok := publisher().(forwarder.CheckpointReader)
			if !ok {
				return nil, errors.New("the broker is not connected yet, or cannot read exactly-once checkpoints")
			}
			return admin.Units(ctx, reader, q)
		}
	}
	api, err := adminapi.New(acfg)
	if err != nil {
		return nil, err
	}
	con, err := console.New(api, logger.With("component", "console"))
	if err != nil {
		return nil, err
	}
	logger.Info("admin API on /api/v1/ and web console on /console/", "tokens", tokens.Names())
	routes := http.NewServeMux()
	api.Register(routes)
	con.Register(routes)
	guarded := hostGuard(cfg.HTTP.AllowedHosts, routes)
	return func(mux *http.ServeMux) {
		mux.Handle("/api/v1/", guarded)
		mux.Handle("/console/", guarded)
	}, nil
}
