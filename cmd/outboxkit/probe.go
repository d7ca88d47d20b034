package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"
)

// probeCommand is `outboxkit probe`: a GET of one of the relay's probe endpoints that exits 0 on
// 200 and 1 otherwise, for container healthchecks in images without a shell or curl (the
// Dockerfile's distroless image, docker-compose.yml).
func (a *app) probeCommand() *cobra.Command {
	var (
		url     string
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "probe",
		Short: "Check a running relay's /livez or /readyz (exit 0 on 200), for container healthchecks",
		Long: `probe sends GET to url and exits 0 when the relay answers 200, 1 otherwise (another status,
no answer within --timeout). It reads no configuration file.`,
		Example: `  outboxkit probe                                        # http://127.0.0.1:9464/livez
  outboxkit probe --url http://127.0.0.1:9464/readyz`,
		Args: cobra.NoArgs,
		RunE: a.runE(func(cmd *cobra.Command, _ []string) error {
			return probe(cmd.Context(), url, timeout)
		}),
	}
	cmd.Flags().StringVar(&url, "url", "http://127.0.0.1:9464/livez", "the endpoint to check")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Second, "how long to wait for the answer")
	return cmd
}

func probe(ctx context.Context, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return usageErr(fmt.Errorf("--url %q: %w", url, err))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("probe %s: %w", url, err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("probe %s: %s", url, resp.Status)
	}
	return nil
}
