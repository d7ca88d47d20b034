package monitoring

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Server is a Prometheus server process of its own (not a system service): its configuration,
// storage and log live in one directory, it listens on its own address.
type Server struct {
	// Addr is host:port of its HTTP API.
	Addr string
	// LogPath is the file receiving its output.
	LogPath string

	cmd    *exec.Cmd
	done   chan struct{}
	client *http.Client
}

// StartServer starts the prometheus binary bin with config (a prometheus.yml document) on
// addr, keeping everything in dir, and returns once it reports ready (or ctx ends).
func StartServer(ctx context.Context, bin, dir, addr string, config []byte) (*Server, error) {
	configPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(configPath, config, 0o644); err != nil {
		return nil, fmt.Errorf("prometheus: write config: %w", err)
	}
	s := &Server{Addr: addr, LogPath: filepath.Join(dir, "prometheus.log"), done: make(chan struct{}),
		client: &http.Client{Timeout: 10 * time.Second}}
	logFile, err := os.Create(s.LogPath)
	if err != nil {
		return nil, fmt.Errorf("prometheus: log file: %w", err)
	}
	s.cmd = exec.Command(bin, "--config.file="+configPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	if err := s.cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("prometheus: start %s: %w", bin, err)
	}
	go func() {
		_ = s.cmd.Wait()
		_ = logFile.Close()
		close(s.done)
	}()
	for {
		if err := s.get(ctx, "/-/ready", nil); err == nil {
			return s, nil
		}
		select {
		case <-s.done:
			return nil, fmt.Errorf("prometheus exited before it was ready (%s): see %s", s.cmd.ProcessState, s.LogPath)
		case <-ctx.Done():
			s.Stop()
			return nil, fmt.Errorf("prometheus not ready on %s: %w (log %s)", addr, ctx.Err(), s.LogPath)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Stop ends the server: SIGTERM, then SIGKILL after 10 s. Safe to call twice.
func (s *Server) Stop() {
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// Alert is one entry of /api/v1/alerts.
type Alert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"` // pending or firing
	ActiveAt    time.Time         `json:"activeAt"`
	Value       string            `json:"value"`
}

// Alerts returns the active (pending or firing) alerts.
func (s *Server) Alerts(ctx context.Context) ([]Alert, error) {
	var data struct {
		Alerts []Alert `json:"alerts"`
	}
	if err := s.get(ctx, "/api/v1/alerts", &data); err != nil {
		return nil, err
	}
	return data.Alerts, nil
}

// Sample is one series of an instant query's vector result.
type Sample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"` // [unix time, "value"]
}

// Query evaluates expr now and returns its vector result (a scalar result has no samples).
func (s *Server) Query(ctx context.Context, expr string) ([]Sample, error) {
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := s.get(ctx, "/api/v1/query?query="+url.QueryEscape(expr), &data); err != nil {
		return nil, fmt.Errorf("query %s: %w", expr, err)
	}
	if data.ResultType != "vector" {
		return nil, nil
	}
	var samples []Sample
	if err := json.Unmarshal(data.Result, &samples); err != nil {
		return nil, fmt.Errorf("query %s: decode result: %w", expr, err)
	}
	return samples, nil
}

// get calls an API path and decodes the envelope's data into out (nil: only the status counts).
func (s *Server) get(ctx context.Context, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.Addr+path, nil)
	if err != nil {
		return err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	if out == nil {
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", path, resp.Status)
		}
		return nil
	}
	var envelope struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &envelope); err != nil {
		return fmt.Errorf("GET %s: %s: %w", path, resp.Status, err)
	}
	if envelope.Status != "success" {
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, envelope.Error)
	}
	if err := json.Unmarshal(envelope.Data, out); err != nil {
		return fmt.Errorf("GET %s: decode data: %w", path, err)
	}
	return nil
}
