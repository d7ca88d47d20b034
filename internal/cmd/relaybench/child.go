package main

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	wforwarder "github.com/ThreeDotsLabs/watermill/components/forwarder"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/outbox"
)

// child is a relay running as a child process of the benchmark.
type child struct {
	relay   string
	cmd     *exec.Cmd
	exited  chan struct{} // closed when the process has exited; then waitErr is set
	waitErr error
	// stdout is the rest of the child's standard output, read until it ends: the cdc relay
	// reports its receive lag there when it stops (see reportReceiveLag).
	stdout chan []string
}

// startChild starts a relay process, waits until it has connected to the database and the
// broker ("ready" on its stdout), then tells it to go: process start-up is not measured.
func startChild(relay string, d database, name string, o options) (*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find the relaybench executable: %w", err)
	}
	role, isBase := baseOf(relay)
	if isBase {
		self = o.baseline
	}
	cmd := exec.Command(self, "-role", role, "-db", d.name, "-table", name, "-pg", o.pgDSN, "-mysql", o.mysqlDSN,
		"-kafka", strings.Join(o.brokers, ","), "-workers", strconv.Itoa(o.workers), "-batch", strconv.Itoa(o.batch), "-batch-mib", strconv.FormatFloat(o.batchMiB, 'f', -1, 64),
		"-units", strconv.Itoa(o.units), "-pulsar", o.pulsarURL, "-nats", o.natsURL, "-rabbitmq", o.rabbitMQ,
		"-compression", o.compress)
	if isSchemaRelay(role) { // only these children know -registry (a -baseline binary may not)
		cmd.Args = append(cmd.Args, "-registry", o.registry)
	}
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("%s relay child: %w", relay, err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("%s relay child: %w", relay, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the %s relay child: %w", relay, err)
	}
	out := bufio.NewReader(stdout)
	line, err := out.ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("%s relay child did not get ready (read %q, %v; its stderr is above)", relay, line, err)
	}
	c := &child{relay: relay, cmd: cmd, exited: make(chan struct{}), stdout: make(chan []string, 1)}
	read := make(chan struct{})
	go func() {
		defer close(read)
		var lines []string
		for {
			line, err := out.ReadString('\n')
			if line = strings.TrimSpace(line); line != "" {
				lines = append(lines, line)
			}
			if err != nil {
				c.stdout <- lines
				return
			}
		}
	}()
	go func() {
		<-read // Wait closes the pipe: read it to the end first
		c.waitErr = cmd.Wait()
		close(c.exited)
	}()
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		_ = cmd.Process.Kill()
		<-c.exited
		return nil, fmt.Errorf("tell the %s relay child to go: %w", relay, err)
	}
	return c, nil
}

// watch returns a context that ends after timeout, or as soon as the child exits on its own
// (a crashed relay fails the measurement at once instead of at the timeout).
func (c *child) watch(timeout time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeoutCause(context.Background(), timeout,
		fmt.Errorf("timed out after %v", timeout))
	go func() {
		select {
		case <-c.exited:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// exitedEarly reports the child's exit if it happened before stop.
func (c *child) exitedEarly() error {
	select {
	case <-c.exited:
		return fmt.Errorf("the %s relay child exited before the end of the measurement (%v; its stderr is above)", c.relay, c.waitErr)
	default:
		return nil
	}
}

// stop stops the relay with SIGTERM and returns its CPU time and peak RSS. The peak is read
// from /proc (VmHWM) before the stop: the rusage of a forked child also counts the pages of the
// parent it was forked from.
func (c *child) stop() (cpu time.Duration, peakMiB float64, err error) {
	err = c.exitedEarly()
	if status, readErr := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid)); readErr == nil {
		for _, line := range strings.Split(string(status), "\n") {
			if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				kib, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
				peakMiB = float64(kib) / 1024
			}
		}
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
		err = errors.Join(err, fmt.Errorf("the %s relay child did not stop within 30 s of SIGTERM and was killed", c.relay))
	}
	if usage, ok := c.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		cpu = time.Duration(usage.Utime.Nano() + usage.Stime.Nano())
	}
	return cpu, peakMiB, err
}

// output returns the lines the child wrote to its standard output after "ready" (once it has
// exited).
func (c *child) output() []string {
	select {
	case lines := <-c.stdout:
		return lines
	default:
		return nil
	}
}

// waitForGo is the child's half of startChild.
func waitForGo() error {
	fmt.Println("ready")
	_, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil {
		return fmt.Errorf("wait for the benchmark's go: %w", err)
	}
	return nil
}

// envCPUProfile names a directory: when set, each relay child writes a CPU profile of its run
// there, as <role>-<table>.pprof (go tool pprof -top reads it).
const envCPUProfile = "RELAYBENCH_CPUPROFILE"

// runRelay is the child process: one relay until SIGTERM.
func runRelay(role string, d database, name string, o options) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if dir := os.Getenv(envCPUProfile); dir != "" {
		stopProfile, err := startCPUProfile(filepath.Join(dir, role+"-"+name+".pprof"))
		if err != nil {
			return err
		}
		defer stopProfile()
	}
	db, err := sql.Open(d.driver, d.dsn)
	if err != nil {
		return fmt.Errorf("open %s: %w", d.label, err)
	}
	defer db.Close()
	db.SetMaxIdleConns(16) // as the CLI's relay (cmd/outboxkit, openDB)
	if err := db.PingContext(ctx); err != nil {
		return fmt.Errorf("connect to %s: %w", d.label, err)
	}
	switch role {
	case relayCeiling:
		return runCeiling(ctx, db, d, name, o)
	case relayCDCCeiling:
		return runCDCCeiling(ctx, d, name, o)
	case relayWALCeiling:
		return runWALCeiling(ctx, d, name, o)
	}
	var pub message.Publisher
	var retriable func(error) bool
	var registryRequests *countingTransport
	if isSchemaRelay(role) {
		pub, retriable, registryRequests, err = schemaPublisher(o)
	} else {
		pub, retriable, err = relayPublisher(role, o)
	}
	if err != nil {
		return err
	}
	defer pub.Close()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	switch role {
	case relayOutboxkit, relayExactlyOnce, relayCDC, relayCDCExactlyOnce, relayWAL, relayWALExactlyOnce, relayPulsar, relayNATS, relayRabbitMQ, relaySQLWriters,
		relayAvro, relayProtobuf:
		cfg := forwarder.Config{DB: db, Dialect: d.dialect, Table: name, Publisher: pub,
			Workers: o.workers, BatchSize: o.batch, MaxBatchBytes: int64(o.batchMiB * (1 << 20)), Logger: logger, IsRetriable: retriable}
		var reg *prometheus.Registry
		if isCDC(role) {
			cfg.Source, cfg.CDC.DSN = forwarder.SourceCDC, d.dsn
			reg = prometheus.NewRegistry()
			cfg.Metrics = reg
		}
		if isWAL(role) {
			walForwarderConfig(&cfg, d, name)
		}
		if isExactlyOnce(role) {
			cfg.Delivery, cfg.CheckpointTopic, cfg.TransactionalUnits = forwarder.ExactlyOnce, "relaybench.checkpoints", o.units
		}
		if d.dialect == outbox.Postgres && !isCDC(role) && !isWAL(role) {
			table, err := outbox.NewTable(outbox.Postgres, name)
			if err != nil {
				return fmt.Errorf("outbox table %q: %w", name, err)
			}
			cfg.Wakeups = forwarder.ListenPostgres(ctx, d.dsn, table, logger)
		}
		f, err := forwarder.New(cfg)
		if err != nil {
			return fmt.Errorf("forwarder: %w", err)
		}
		if err := waitForGo(); err != nil {
			return err
		}
		err = f.Run(ctx)
		if reg != nil {
			reportReceiveLag(reg)
		}
		if registryRequests != nil {
			reportRegistryRequests(registryRequests)
		}
		return err
	case relayStock:
		schema, offsets := stockAdapters(d)
		sub, err := wsql.NewSubscriber(wsql.BeginnerFromStdSQL(db), wsql.SubscriberConfig{
			SchemaAdapter: schema, OffsetsAdapter: offsets, ConsumerGroup: "bench",
		}, watermill.NopLogger{})
		if err != nil {
			return fmt.Errorf("watermill-sql subscriber: %w", err)
		}
		fwd, err := wforwarder.NewForwarder(sub, pub, watermill.NopLogger{}, wforwarder.Config{ForwarderTopic: name})
		if err != nil {
			return fmt.Errorf("watermill forwarder: %w", err)
		}
		if err := waitForGo(); err != nil {
			return err
		}
		return fwd.Run(ctx)
	}
	return fmt.Errorf("unknown role %q", role)
}

// startCPUProfile starts a CPU profile written to path; the returned function ends it.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", envCPUProfile, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("%s: start the CPU profile: %w", envCPUProfile, err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}

// receiveLagLine starts the line a cdc relay child prints when it stops: the median and 99th
// percentile of outboxkit_cdc_receive_lag_seconds (commit to its arrival on the stream) in
// milliseconds, interpolated in the histogram's buckets, and the number of commits.
const receiveLagLine = "cdc-receive-lag-ms"

func reportReceiveLag(reg *prometheus.Registry) {
	families, err := reg.Gather()
	if err != nil {
		return
	}
	for _, mf := range families {
		if mf.GetName() != "outboxkit_cdc_receive_lag_seconds" || len(mf.GetMetric()) == 0 {
			continue
		}
		h := mf.GetMetric()[0].GetHistogram()
		n := h.GetSampleCount()
		if n == 0 {
			return
		}
		quantile := func(q float64) float64 {
			rank := q * float64(n)
			lower, below := 0.0, uint64(0)
			for _, b := range h.GetBucket() {
				if float64(b.GetCumulativeCount()) >= rank {
					in := b.GetCumulativeCount() - below
					if in == 0 {
						return b.GetUpperBound() * 1000
					}
					return (lower + (b.GetUpperBound()-lower)*(rank-float64(below))/float64(in)) * 1000
				}
				lower, below = b.GetUpperBound(), b.GetCumulativeCount()
			}
			return lower * 1000 // above the last bucket
		}
		fmt.Printf("%s %.1f %.1f %d\n", receiveLagLine, quantile(0.5), quantile(0.99), n)
	}
}

// parseReceiveLag reads the line of reportReceiveLag from a child's output.
func parseReceiveLag(lines []string) (p50, p99 time.Duration, ok bool) {
	for _, l := range lines {
		var a, b float64
		var n int
		if _, err := fmt.Sscanf(l, receiveLagLine+" %f %f %d", &a, &b, &n); err == nil {
			return time.Duration(a * float64(time.Millisecond)), time.Duration(b * float64(time.Millisecond)), true
		}
	}
	return 0, 0, false
}
