package main

import (
	"log/slog"
	"net/http"

	"github.com/outboxkit/outboxkit/cmd/outboxkit/internal/adminapi"
)

// mountConsole serves the web console under /console/ (not yet built: nothing).
func mountConsole(_ *http.ServeMux, _ *adminapi.API, _ *slog.Logger) {}
