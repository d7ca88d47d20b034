package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/cmd/outboxkit/internal/adminapi"
	"github.com/outboxkit/outboxkit/cmd/outboxkit/internal/console"
	"github.com/outboxkit/outboxkit/cmd/outboxkit/internal/relayconfig"
	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/forwarder/admin"
)

// adminRoutes returns what mounts the admin API (/api/v1/) and console (/console/) on a
// listener's routes when a token is configured, else nil (both off, never open), and a function
// that stops reloading the tokens on SIGHUP. A token file that cannot be read, or a bad token, is a configuration error.
// publisher returns the broker's publisher once it is connected (nil before): the exactly-once
// units view reads the checkpoints through it.
func adminRoutes(cfg relayconfig.Config, db *sql.DB, publisher func() message.Publisher, logger *slog.Logger) (func(*http.ServeMux), func(), error) {
	tokens, err := adminapi.LoadTokens(cfg.HTTP.AdminReadTokensFile, cfg.HTTP.AdminWriteTokensFile, os.LookupEnv)
	if err != nil {
		return nil, nil, usageErr(fmt.Errorf("http: %w", err))
	}
	if tokens.Empty() {
		logger.Info("admin API and console off: no admin token configured (http.admin_read_tokens_file, http.admin_write_tokens_file)")
		return nil, onSIGHUP(func() {
			logger.Warn("SIGHUP ignored: the admin API and console are off (no admin token at start); a token added now needs a restart")
		}), nil
	}
	all, err := admin.New(db, cfg.Database.Dialect, cfg.Database.Table)
	if err != nil {
		return nil, nil, usageErr(err)
	}
	// The API and console show and act on the relay's tenants only, as it relays them.
	adm := all.ForTenants(cfg.Forwarder.Tenants...)
	acfg := adminapi.Config{Admin: adm, Tokens: tokens, Logger: logger.With("component", "admin"), SlotGroups: streamedGroups(cfg),
		WALSlot: walSlotOf(cfg), Scrub: cfg.Scrubber()}
	if forwarder.Delivery(cfg.Forwarder.Delivery) == forwarder.ExactlyOnce {
		f := cfg.Forwarder
		group := f.LeaseGroup
		if group == "" {
			group = forwarder.DefaultLeaseGroup(f.Tenants)
		}
		q := admin.UnitsQuery{LeaseGroup: group, TransactionalIDPrefix: f.TransactionalIDPrefix, CheckpointTopic: f.CheckpointTopic}
		acfg.Units = func(ctx context.Context) ([]admin.UnitStatus, error) {
			reader, ok := publisher().(admin.CheckpointReader)
			if !ok {
				return nil, errors.New("the broker is not connected yet, or cannot read exactly-once checkpoints")
			}
			return adm.Units(ctx, reader, q)
		}
	}
	api, err := adminapi.New(acfg)
	if err != nil {
		return nil, nil, err
	}
	con, err := console.New(api, logger.With("component", "console"))
	if err != nil {
		return nil, nil, err
	}
	logger.Info("admin API on /api/v1/ and web console on /console/", "tokens", tokens.Names())
	routes := http.NewServeMux()
	api.Register(routes)
	con.Register(routes)
	guarded := hostGuard(cfg.HTTP.AllowedHosts, routes)
	stop := reloadTokensOnSIGHUP(cfg.HTTP, api, logger)
	return func(mux *http.ServeMux) {
		mux.Handle("/api/v1/", guarded)
		mux.Handle("/console/", guarded)
	}, stop, nil
}

// reloadTokensOnSIGHUP reads the token files and variables again on each SIGHUP, until the
// returned function is called: the API and console accept the new set from the next request on,
// and the console sessions of a removed or changed token end. A set that cannot be read keeps
// the previous one (logged); an empty set refuses everyone.
func reloadTokensOnSIGHUP(h relayconfig.HTTP, api *adminapi.API, logger *slog.Logger) func() {
	return onSIGHUP(func() {
		tokens, err := adminapi.LoadTokens(h.AdminReadTokensFile, h.AdminWriteTokensFile, os.LookupEnv)
		if err != nil {
			logger.Error("admin tokens not reloaded: the previous tokens stay", "error", err)
			return
		}
		api.SetTokens(tokens)
		if tokens.Empty() {
			logger.Warn("admin tokens reloaded: none left, the admin API and console refuse every request")
			return
		}
		logger.Info("admin tokens reloaded", "tokens", tokens.Names())
	})
}

// onSIGHUP calls handle on each SIGHUP until the returned function is called. A relay always
// handles SIGHUP, so that the signal a token reloader sends never ends it (the default action
// of SIGHUP terminates the process).
func onSIGHUP(handle func()) func() {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-hup:
				handle()
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		close(done)
	}
}
