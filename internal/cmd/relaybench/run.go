package main

import (
	"fmt"
	"os"
	"time"
)

// run measures every drain o asks for, then the steady-rate latency, and prints the tables.
func run(o options) error {
	began := time.Now()
	noise := newNoise()
	conns, err := openAll(o)
	if err != nil {
		return err
	}
	defer conns.close()
	switch o.only {
	case onlyWrite:
		return runWriteSide(conns, o, noise, began)
	case onlyScheduled:
		return runScheduled(conns, o, noise, began)
	}
	res := newResults(o)
	if err := runDrains(conns, o, noise, res); err != nil {
		return err
	}
	steadyRows, err := runSteady(conns, o, noise, res)
	if err != nil {
		return err
	}
	w, err := runWrites(conns, o, noise)
	if err != nil {
		return err
	}
	noise.sample()
	noise.finish(time.Since(began))
	return report(o, res, steadyRows, w, noise)
}

// runDrains measures every drain case, o.repeat times, into res; a relay or database found not
// available is marked so and skipped.
func runDrains(conns connections, o options, noise *noise, res *results) error {
	for rep := 1; rep <= o.repeat; rep++ {
		for _, db := range o.dbs {
			for _, size := range o.payloads {
				for _, c := range rotateSchemaRelays(ordered(drainCases(o), rep), rep) {
					noise.sample()
					k := drainKey{db: db.name, size: size, keys: c.keys, relay: c.relay}
					if reason := res.unavailable(k); reason != "" {
						continue
					}
					s, err := drain(conns.get(db.name), db, o, c.relay, size, c.keys)
					if err != nil {
						var na *notAvailableError
						if asNotAvailable(err, &na) {
							res.markUnavailable(k, na.reason)
							fmt.Fprintf(os.Stderr, "%s on %s: n/a: %s\n", c.relay, db.label, na.reason)
							continue
						}
						if c.relay == relayWALExactlyOnce {
							// New in the forwarder: its failure is its row's, not the whole run's.
							res.markUnavailable(k, "failed: "+err.Error())
							fmt.Fprintf(os.Stderr, "%s on %s: failed: %v\n", c.relay, db.label, err)
							continue
						}
						return fmt.Errorf("%s drain on %s, %d B, %d keys: %w", c.relay, db.label, size, c.keys, err)
					}
					res.add(k, s)
					fmt.Fprintf(os.Stderr, "[%d/%d] %s %s %d B %d keys: %.0f events/s, CPU %.2f s, peak RSS %.0f MiB, first event after %v\n",
						rep, o.repeat, db.label, c.relay, size, c.keys, s.rate(), s.cpu.Seconds(), s.rssMiB, s.firstEvent.Round(time.Millisecond))
				}
			}
		}
	}
	return nil
}

// runSteady measures the steady rate (o.rate > 0) of every relay but the ceiling, with each
// number of relays of o.steadyRelays.
func runSteady(conns connections, o options, noise *noise, res *results) ([]steadyResult, error) {
	if o.rate <= 0 {
		return nil, nil
	}
	var rows []steadyResult
	for _, db := range o.dbs {
		for _, relay := range o.relays {
			if relay == relayCeiling || relay == relayWALCeiling || relay == relayWALExactlyOnce {
				continue // the ceilings are drain floors; the wal ceiling's latency would need stamps it does not read
			}
			if _, isBase := baseOf(relay); isBase {
				continue // -baseline compares drains
			}
			if isSchemaRelay(relay) {
				continue // the latency run stamps its payloads with binary times: no schema fits them
			}
			noise.sample()
			if reason := res.unavailableRelay(db.name, relay); reason != "" {
				continue
			}
			reps := 1
			if relay == relayWAL {
				reps = o.repeat // its target's spread (waltargets.go)
			}
			for range reps {
				for _, n := range o.steadyRelays {
					r, err := steady(conns.get(db.name), db, o, relay, n, o.payloads[0], maxInt(o.keys))
					if err != nil {
						return nil, fmt.Errorf("%s steady rate on %s, %d relays: %w", relay, db.label, n, err)
					}
					rows = append(rows, r)
				}
			}
		}
	}
	return rows, nil
}

// writeResults are the write-side measurements: the cost of an event in a transaction, alone and
// under concurrency (with the cdc or wal relay on PostgreSQL), and of plain-SQL writers. With the
// wal relay they are measured o.repeat times, for the spread of its targets.
type writeResults struct {
	singleReps     [][]writeCost
	concurrentReps [][]concurrentCost
	// slots are the replication slots on the server at each repetition's start: the wal
	// writer's guard reads every one of them.
	slots []int
	sql   []sqlWriteCost
}

// runWrites measures the write side the relays of o ask for.
func runWrites(conns connections, o options, noise *noise) (writeResults, error) {
	var w writeResults
	if o.skipWrites {
		return w, nil
	}
	if (contains(o.relays, relayCDC) || contains(o.relays, relayWAL)) && containsDB(o.dbs, "postgres") {
		reps := 1
		if contains(o.relays, relayWAL) {
			reps = o.repeat
		}
		pg, _ := o.database("postgres")
		for rep := 1; rep <= reps; rep++ {
			noise.sample()
			var slots int
			if err := conns.get("postgres").QueryRow("SELECT count(*) FROM pg_replication_slots").Scan(&slots); err != nil {
				return w, fmt.Errorf("count the replication slots: %w", err)
			}
			w.slots = append(w.slots, slots)
			single, err := measureWriteSide(conns.get("postgres"), pg, 2000, false)
			if err != nil {
				return w, fmt.Errorf("write-side cost: %w", err)
			}
			noise.sample()
			concurrent, err := measureConcurrentWrites(conns.get("postgres"), pg)
			if err != nil {
				return w, fmt.Errorf("write side under concurrency: %w", err)
			}
			w.singleReps, w.concurrentReps = append(w.singleReps, single), append(w.concurrentReps, concurrent)
			fmt.Fprintf(os.Stderr, "[%d/%d] write side measured, load average %s\n", rep, reps, loadavg())
		}
	}
	if contains(o.relays, relaySQLWriters) {
		for _, db := range o.dbs {
			noise.sample()
			costs, err := measureSQLWriteCost(conns.get(db.name), db, sqlWriteTransactions)
			if err != nil {
				return w, fmt.Errorf("plain-SQL write cost on %s: %w", db.label, err)
			}
			w.sql = append(w.sql, costs...)
		}
	}
	return w, nil
}

// report prints every table and target of the run, and writes the plots asked for.
func report(o options, res *results, steadyRows []steadyResult, w writeResults, noise *noise) error {
	printDrainTable(os.Stdout, res, o)
	printSchemaTable(os.Stdout, res, o)
	printSQLWriteTable(os.Stdout, w.sql, sqlWriteTransactions)
	printDecodeTable(os.Stdout, res, o)
	printCoresTable(os.Stdout, res, o)
	printCPUPerEvent(os.Stdout, res, o)
	printSteadyTable(os.Stdout, steadyRows, o)
	printCDCTargets(os.Stdout, res, steadyRows, o)
	printExactlyOnceTargets(os.Stdout, res, steadyRows, o)
	for i, single := range w.singleReps {
		if len(w.singleReps) > 1 {
			fmt.Fprintf(os.Stdout, "\nwrite side, repetition %d of %d:\n", i+1, len(w.singleReps))
		}
		printWriteTable(os.Stdout, single)
		printConcurrentTable(os.Stdout, w.concurrentReps[i])
	}
	printWALTargets(os.Stdout, res, steadyRows, w, o)
	noise.print(os.Stdout, res)
	if o.svg != "" {
		if err := writePlot(o.svg, res, o); err != nil {
			return fmt.Errorf("-svg %s: %w", o.svg, err)
		}
		fmt.Fprintf(os.Stdout, "\nplot written to %s\n", o.svg)
	}
	if o.relaysSVG != "" {
		if err := writeRelaysPlot(o.relaysSVG, res, steadyRows, o); err != nil {
			return fmt.Errorf("-relays-svg %s: %w", o.relaysSVG, err)
		}
		fmt.Fprintf(os.Stdout, "\nrelays plot written to %s\n", o.relaysSVG)
	}
	return nil
}

// runWriteSide measures and prints the write-side table alone (-only write), -repeat times.
func runWriteSide(conns connections, o options, noise *noise, began time.Time) error {
	pg, _ := o.database("postgres")
	for rep := 1; rep <= o.repeat; rep++ {
		noise.sample()
		writes, err := measureWriteSide(conns.get("postgres"), pg, 2000, o.guardVariants)
		if err != nil {
			return fmt.Errorf("write-side cost: %w", err)
		}
		noise.sample()
		concurrent, err := measureConcurrentWrites(conns.get("postgres"), pg)
		if err != nil {
			return fmt.Errorf("write side under concurrency: %w", err)
		}
		fmt.Fprintf(os.Stdout, "\n[%d/%d] load average %s", rep, o.repeat, loadavg())
		printWriteTable(os.Stdout, writes)
		printConcurrentTable(os.Stdout, concurrent)
	}
	noise.sample()
	noise.finish(time.Since(began))
	noise.printMachine(os.Stdout)
	return nil
}

// drainCase is one relay at one number of keys; the ceiling and the wal ceiling, which ignore
// keys, and the wal source's exactly-once relay, whose target is set at the largest number of
// keys (waltargets.go; it keeps -source wal's run short), are measured once per (db, payload),
// at the largest number of keys.
type drainCase struct {
	relay string
	keys  int
}

// drainCases returns the drains of one database and payload size: the ceiling first, then every
// relay at every number of keys.
func drainCases(o options) []drainCase {
	var cases []drainCase
	if contains(o.relays, relayCeiling) {
		cases = append(cases, drainCase{relayCeiling, maxInt(o.keys)})
	}
	if contains(o.relays, relayWALCeiling) {
		cases = append(cases, drainCase{relayWALCeiling, maxInt(o.keys)})
	}
	for _, k := range o.keys {
		for _, r := range o.relays {
			switch {
			case r == relayCeiling || r == relayWALCeiling:
			case r == relayWALExactlyOnce && k != maxInt(o.keys):
			default:
				cases = append(cases, drainCase{r, k})
			}
		}
	}
	return cases
}
