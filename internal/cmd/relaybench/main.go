// Command relaybench measures outboxkit's forwarder against Watermill's stock forwarder
// (watermill-sql subscriber + components/forwarder) side by side, on the same PostgreSQL and the
// same Kafka, with the same events and the same Kafka publisher, and prints a table:
// throughput draining a pre-filled backlog, commit-to-consume latency at a steady rate, and the
// CPU time and peak RSS of each relay process (each relay runs as a child process).
//
//	go run ./internal/cmd/relaybench -events 20000
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	wforwarder "github.com/ThreeDotsLabs/watermill/components/forwarder"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outboxkit/outboxkit/brokers/kafka"
	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

type options struct {
	pgDSN    string
	brokers  []string
	events   int
	keys     int
	payloads []int
	rate     int
	seconds  int
	relays   []string
	workers  int
	batch    int
	compress string
}

func main() {
	role := flag.String("role", "", "internal: run as a relay child (outboxkit or stock)")
	table := flag.String("table", "", "internal: outbox table or forwarder topic of the child")
	var o options
	flag.StringVar(&o.pgDSN, "pg", envOr(testsupport.EnvPostgresDSN, testsupport.DefaultPostgresDSN), "PostgreSQL URL")
	brokers := flag.String("kafka", envOr(testsupport.EnvKafkaBrokers, testsupport.DefaultKafkaBrokers), "Kafka brokers")
	flag.IntVar(&o.events, "events", 20000, "events in the backlog each relay drains")
	flag.IntVar(&o.keys, "keys", 1000, "distinct aggregate ids")
	payloads := flag.String("payloads", "256,4096", "payload sizes in bytes")
	flag.IntVar(&o.rate, "rate", 1000, "events/s of the steady-rate latency run (0 skips it)")
	flag.IntVar(&o.seconds, "seconds", 10, "duration of the latency run")
	relays := flag.String("relays", "outboxkit,stock", "relays to measure")
	flag.IntVar(&o.workers, "workers", 0, "outboxkit forwarder Workers (0: its default)")
	flag.IntVar(&o.batch, "batch", 0, "outboxkit forwarder BatchSize (0: its default)")
	flag.StringVar(&o.compress, "compression", "", "Kafka compression for both relays (none, gzip, snappy, lz4, zstd; empty: brokers/kafka's default)")
	flag.Parse()
	o.brokers = strings.Split(*brokers, ",")
	o.relays = strings.Split(*relays, ",")
	for _, p := range strings.Split(*payloads, ",") {
		n, err := strconv.Atoi(p)
		if err != nil || n < 16 {
			fatalf("-payloads: %q is not a size of at least 16 bytes", p)
		}
		o.payloads = append(o.payloads, n)
	}
	if *role != "" {
		if err := runRelay(*role, *table, o); err != nil {
			fatalf("%s relay: %v", *role, err)
		}
		return
	}
	if err := run(o); err != nil {
		fatalf("%v", err)
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "relaybench: "+format+"\n", args...)
	os.Exit(1)
}

// result is one row of the table.
type result struct {
	relay, scenario string
	events          int
	seconds         float64
	p50, p99        time.Duration
	cpu             time.Duration
	maxRSSMiB       float64
}

func run(o options) error {
	db, err := sql.Open("pgx", o.pgDSN)
	if err != nil {
		return err
	}
	defer db.Close()
	var results []result
	for _, size := range o.payloads {
		for _, relay := range o.relays {
			r, err := drain(db, o, relay, size)
			if err != nil {
				return fmt.Errorf("%s drain, %d B: %w", relay, size, err)
			}
			results = append(results, r)
			fmt.Fprintf(os.Stderr, "%s %d B: %.0f events/s\n", relay, size, float64(r.events)/r.seconds)
		}
	}
	if o.rate > 0 {
		for _, relay := range o.relays {
			r, err := steady(db, o, relay, o.payloads[0])
			if err != nil {
				return fmt.Errorf("%s steady rate: %w", relay, err)
			}
			results = append(results, r)
		}
	}
	printTable(results, o)
	return nil
}

// setup prepares an empty outbox (outboxkit) or forwarder topic (stock) and returns a function
// that writes events in transactions of the given size, and the names to pass to the child.
func setup(db *sql.DB, relay string) (name, topic string, write func(ctx context.Context, events []outbox.Event) error, err error) {
	ctx := context.Background()
	name = testsupport.UniqueName("bench")
	topic = testsupport.UniqueName("bench_events")
	switch relay {
	case "outboxkit":
		w, err := outbox.NewWriter(outbox.Config{Dialect: outbox.Postgres, Table: name})
		if err != nil {
			return "", "", nil, err
		}
		if err := outbox.Migrate(ctx, db, w.Table()); err != nil {
			return "", "", nil, err
		}
		return name, topic, func(ctx context.Context, events []outbox.Event) error {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			if err := w.WriteTx(ctx, tx, events...); err != nil {
				_ = tx.Rollback()
				return err
			}
			return tx.Commit()
		}, nil
	case "stock":
		return name, topic, func(ctx context.Context, events []outbox.Event) error {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			sqlPub, err := wsql.NewPublisher(wsql.TxFromStdSQL(tx), wsql.PublisherConfig{SchemaAdapter: wsql.DefaultPostgreSQLSchema{}}, nil)
			if err != nil {
				return err
			}
			pub := wforwarder.NewPublisher(sqlPub, wforwarder.PublisherConfig{ForwarderTopic: name})
			msgs := make([]*message.Message, len(events))
			for i, e := range events {
				msgs[i] = e.ToMessage()
			}
			if err := pub.Publish(topic, msgs...); err != nil {
				_ = tx.Rollback()
				return err
			}
			return tx.Commit()
		}, nil
	}
	return "", "", nil, fmt.Errorf("unknown relay %q", relay)
}

func initStockSchema(db *sql.DB, name string) error {
	sub, err := wsql.NewSubscriber(wsql.BeginnerFromStdSQL(db), wsql.SubscriberConfig{
		SchemaAdapter: wsql.DefaultPostgreSQLSchema{}, OffsetsAdapter: wsql.DefaultPostgreSQLOffsetsAdapter{},
		InitializeSchema: true, ConsumerGroup: "bench",
	}, nil)
	if err != nil {
		return err
	}
	defer sub.Close()
	return sub.SubscribeInitialize(name)
}

// makeEvent returns an event with a payload of random hex text (it compresses about 2x, like
// typical JSON), optionally stamped with the current time in its first 8 bytes.
func makeEvent(topic string, i, keys, size int, stamp bool) outbox.Event {
	raw := make([]byte, (size+1)/2)
	_, _ = rand.Read(raw)
	payload := []byte(hex.EncodeToString(raw))[:size]
	if stamp {
		binary.BigEndian.PutUint64(payload, uint64(time.Now().UnixNano()))
	}
	return outbox.Event{ID: uuid.Must(uuid.NewV7()), Topic: topic, AggregateType: "order",
		AggregateID: "order-" + strconv.Itoa(i%keys), EventType: "OrderChanged", Payload: payload}
}

// drain pre-fills a backlog, starts the relay process and times it until the last event is
// consumed from Kafka.
func drain(db *sql.DB, o options, relay string, size int) (result, error) {
	name, topic, write, err := setup(db, relay)
	if err != nil {
		return result{}, err
	}
	if relay == "stock" {
		if err := initStockSchema(db, name); err != nil {
			return result{}, err
		}
	}
	defer cleanup(db, relay, name)
	ctx := context.Background()
	for start := 0; start < o.events; start += 500 {
		var batch []outbox.Event
		for i := start; i < min(start+500, o.events); i++ {
			batch = append(batch, makeEvent(topic, i, o.keys, size, false))
		}
		if err := write(ctx, batch); err != nil {
			return result{}, fmt.Errorf("fill backlog: %w", err)
		}
	}
	consumer, err := newConsumer(o.brokers, topic)
	if err != nil {
		return result{}, err
	}
	defer consumer.Close()
	child, err := startChild(relay, name, o)
	if err != nil {
		return result{}, err
	}
	began := time.Now()
	got, _, err := consumeN(consumer, o.events, 10*time.Minute, false)
	elapsed := time.Since(began)
	cpu, rss := stopChild(child)
	if err != nil {
		return result{}, err
	}
	return result{relay: relay, scenario: fmt.Sprintf("drain %d × %d B", o.events, size), events: got,
		seconds: elapsed.Seconds(), cpu: cpu, maxRSSMiB: rss}, nil
}

// steady writes single-event transactions at o.rate for o.seconds with the relay running and
// measures commit-to-consume latency (an upper bound of commit-to-broker-ack).
func steady(db *sql.DB, o options, relay string, size int) (result, error) {
	name, topic, write, err := setup(db, relay)
	if err != nil {
		return result{}, err
	}
	if relay == "stock" {
		if err := initStockSchema(db, name); err != nil {
			return result{}, err
		}
	}
	defer cleanup(db, relay, name)
	consumer, err := newConsumer(o.brokers, topic)
	if err != nil {
		return result{}, err
	}
	defer consumer.Close()
	child, err := startChild(relay, name, o)
	if err != nil {
		return result{}, err
	}
	time.Sleep(2 * time.Second) // let the relay start before measuring
	total := o.rate * o.seconds
	writeErr := make(chan error, 1)
	go func() {
		ctx := context.Background()
		interval := time.Second / time.Duration(o.rate)
		next := time.Now()
		for i := range total {
			if err := write(ctx, []outbox.Event{makeEvent(topic, i, o.keys, size, true)}); err != nil {
				writeErr <- err
				return
			}
			next = next.Add(interval)
			if d := time.Until(next); d > 0 {
				time.Sleep(d)
			}
		}
		writeErr <- nil
	}()
	got, latencies, err := consumeN(consumer, total, time.Duration(o.seconds)*time.Second+2*time.Minute, true)
	cpu, rss := stopChild(child)
	if err != nil {
		return result{}, err
	}
	if err := <-writeErr; err != nil {
		return result{}, err
	}
	slices.Sort(latencies)
	return result{relay: relay, scenario: fmt.Sprintf("steady %d/s × %d s", o.rate, o.seconds), events: got,
		seconds: float64(o.seconds), p50: latencies[len(latencies)/2], p99: latencies[len(latencies)*99/100],
		cpu: cpu, maxRSSMiB: rss}, nil
}

func cleanup(db *sql.DB, relay, name string) {
	if relay == "outboxkit" {
		for _, suffix := range []string{"", "_leases", "_relays", "_migrations", "_key_locks"} {
			_, _ = db.Exec("DROP TABLE IF EXISTS " + name + suffix)
		}
		return
	}
	_, _ = db.Exec(`DROP TABLE IF EXISTS "watermill_` + name + `"`)
	_, _ = db.Exec(`DROP TABLE IF EXISTS "watermill_offsets_` + name + `"`)
}

func newConsumer(brokers []string, topic string) (*kgo.Client, error) {
	return kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(50*time.Millisecond),
		kgo.AllowAutoTopicCreation())
}

// consumeN reads until n records arrived; with stamped payloads it also returns each record's
// latency since the commit time written into its first 8 bytes.
func consumeN(client *kgo.Client, n int, timeout time.Duration, stamped bool) (int, []time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	seen := map[string]bool{}
	var latencies []time.Duration
	for len(seen) < n {
		fetches := client.PollFetches(ctx)
		if ctx.Err() != nil {
			return len(seen), latencies, fmt.Errorf("only %d of %d events arrived within %v", len(seen), n, timeout)
		}
		now := time.Now()
		fetches.EachRecord(func(r *kgo.Record) {
			id := ""
			for _, h := range r.Headers {
				if h.Key == outbox.MetadataEventID || h.Key == "_watermill_message_uuid" {
					id = string(h.Value)
				}
			}
			if seen[id] {
				return
			}
			seen[id] = true
			if stamped && len(r.Value) >= 8 {
				latencies = append(latencies, now.Sub(time.Unix(0, int64(binary.BigEndian.Uint64(r.Value)))))
			}
		})
	}
	return len(seen), latencies, nil
}

// startChild starts a relay process, waits until it has connected to the database and the
// broker ("ready" on its stdout), then tells it to go: process start-up is not measured.
func startChild(relay, name string, o options) (*exec.Cmd, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "-role", relay, "-table", name, "-pg", o.pgDSN, "-kafka", strings.Join(o.brokers, ","),
		"-workers", strconv.Itoa(o.workers), "-batch", strconv.Itoa(o.batch), "-compression", o.compress)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("relay child did not get ready (%q, %v)", line, err)
	}
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		return nil, err
	}
	return cmd, nil
}

// waitForGo is the child's half of startChild.
func waitForGo() error {
	fmt.Println("ready")
	_, err := bufio.NewReader(os.Stdin).ReadString('\n')
	return err
}

// stopChild stops the relay with SIGTERM and returns its CPU time and peak RSS. The peak is
// read from /proc (VmHWM) before the stop: the rusage of a forked child also counts the pages
// of the parent it was forked from.
func stopChild(cmd *exec.Cmd) (time.Duration, float64) {
	peakMiB := 0.0
	if status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)); err == nil {
		for _, line := range strings.Split(string(status), "\n") {
			if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				kib, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
				peakMiB = float64(kib) / 1024
			}
		}
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
	usage, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0, peakMiB
	}
	return time.Duration(usage.Utime.Nano() + usage.Stime.Nano()), peakMiB
}

// runRelay is the child process: one relay until SIGTERM.
func runRelay(role, name string, o options) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	db, err := sql.Open("pgx", o.pgDSN)
	if err != nil {
		return err
	}
	defer db.Close()
	pub, err := kafka.NewPublisher(kafka.Config{Brokers: o.brokers, Compression: o.compress}, nil)
	if err != nil {
		return err
	}
	defer pub.Close()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	switch role {
	case "outboxkit":
		table, err := outbox.NewTable(outbox.Postgres, name)
		if err != nil {
			return err
		}
		f, err := forwarder.New(forwarder.Config{DB: db, Dialect: outbox.Postgres, Table: name, Publisher: pub,
			Workers: o.workers, BatchSize: o.batch, Logger: logger, Wakeups: forwarder.ListenPostgres(ctx, o.pgDSN, table, logger), IsRetriable: kafka.Retriable})
		if err != nil {
			return err
		}
		if err := db.PingContext(ctx); err != nil {
			return err
		}
		if err := waitForGo(); err != nil {
			return err
		}
		return f.Run(ctx)
	case "stock":
		sub, err := wsql.NewSubscriber(wsql.BeginnerFromStdSQL(db), wsql.SubscriberConfig{
			SchemaAdapter: wsql.DefaultPostgreSQLSchema{}, OffsetsAdapter: wsql.DefaultPostgreSQLOffsetsAdapter{},
			ConsumerGroup: "bench",
		}, watermill.NopLogger{})
		if err != nil {
			return err
		}
		fwd, err := wforwarder.NewForwarder(sub, pub, watermill.NopLogger{}, wforwarder.Config{ForwarderTopic: name})
		if err != nil {
			return err
		}
		if err := db.PingContext(ctx); err != nil {
			return err
		}
		if err := waitForGo(); err != nil {
			return err
		}
		return fwd.Run(ctx)
	}
	return fmt.Errorf("unknown role %q", role)
}

func printTable(results []result, o options) {
	fmt.Printf("\nrelay benchmark: PostgreSQL -> Kafka (%s), %d keys, same Kafka publisher (brokers/kafka) for both relays\n\n",
		strings.Join(o.brokers, ","), o.keys)
	fmt.Println("| relay | scenario | events | events/s | p50 | p99 | relay CPU | relay peak RSS |")
	fmt.Println("|---|---|---:|---:|---:|---:|---:|---:|")
	rates := map[string]float64{}
	for _, r := range results {
		rate := float64(r.events) / r.seconds
		lat := func(d time.Duration) string {
			if d == 0 {
				return "–"
			}
			return d.Round(100 * time.Microsecond).String()
		}
		fmt.Printf("| %s | %s | %d | %.0f | %s | %s | %.2f s | %.0f MiB |\n", r.relay, r.scenario, r.events, rate,
			lat(r.p50), lat(r.p99), r.cpu.Seconds(), r.maxRSSMiB)
		if strings.HasPrefix(r.scenario, "drain") {
			rates[r.relay+" "+r.scenario] = rate
		}
	}
	fmt.Println()
	for _, size := range o.payloads {
		scenario := fmt.Sprintf("drain %d × %d B", o.events, size)
		if a, b := rates["outboxkit "+scenario], rates["stock "+scenario]; a > 0 && b > 0 {
			fmt.Printf("throughput ratio outboxkit/stock, %d B payloads: %.1fx\n", size, a/b)
		}
	}
}
