package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// What shared the cores during a drain. The services run on this machine, so a drain's rate is
// as much theirs as the relay's: each drain reads the CPU time of every process (/proc/<pid>/stat)
// when the relay is told to go and when the last event is consumed, and counts it by what the
// process is. (A reading of the relay's waits alone once led to the wrong conclusion that the two
// cores bounded the cdc drain; the CPU time of every process, sampled once a second, showed the
// machine running 1.3 to 1.6 of them.)

// coreUsers are the columns of the cores table, in order.
var coreUsers = []string{"relay", "kafka", "walsender", "postgres", "relaybench", "other"}

// procTimes is the CPU time of each process, by pid, with what it is.
type procTimes map[int]procTime

type procTime struct {
	user  string // one of coreUsers
	ticks uint64 // utime + stime, in clock ticks
	start uint64 // starttime, in clock ticks since boot: a pid reused by a new process differs
}

// clockTicks is USER_HZ, which /proc/<pid>/stat counts in: 100 on Linux for every architecture
// Go runs on.
const clockTicks = 100

// readProcTimes reads every process's CPU time; relayPID is the relay child. Without /proc
// (not Linux) it returns nil, and the drain has no cores row.
func readProcTimes(relayPID int) procTimes {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	out := procTimes{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		// The fields after the command name, which is in parentheses and may hold spaces.
		end := bytes.LastIndexByte(stat, ')')
		if end < 0 {
			continue
		}
		f := strings.Fields(string(stat[end+1:]))
		if len(f) < 20 {
			continue
		}
		// f[0] is field 3 of proc(5): utime is field 14, stime 15, starttime 22.
		utime, err1 := strconv.ParseUint(f[11], 10, 64)
		stime, err2 := strconv.ParseUint(f[12], 10, 64)
		start, err3 := strconv.ParseUint(f[19], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		out[pid] = procTime{user: coreUser(pid, self, relayPID), ticks: utime + stime, start: start}
	}
	return out
}

// coreUser says what process pid is.
func coreUser(pid, self, relayPID int) string {
	switch pid {
	case relayPID:
		return "relay"
	case self:
		return "relaybench"
	}
	cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	switch cmd := string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})); {
	case strings.Contains(cmd, "kafka.Kafka"), strings.Contains(cmd, "nats-server"),
		strings.Contains(cmd, "beam.smp") && strings.Contains(cmd, "rabbit"),
		strings.Contains(cmd, " OutboxkitStandalone "), strings.Contains(cmd, "org.apache.pulsar.PulsarStandaloneStarter"):
		return "kafka" // the brokers' column: Kafka, NATS, RabbitMQ, Pulsar
	case strings.HasPrefix(cmd, "postgres: walsender"):
		return "walsender"
	case strings.HasPrefix(cmd, "postgres"), strings.Contains(cmd, "/postgresql/"):
		return "postgres"
	}
	return "other"
}

// coresBetween returns the cores each user ran on average from before to after, elapsed apart.
// A process that started meanwhile (a new pid, or a pid reused: another start time) counts whole;
// one that ended meanwhile is not counted.
func coresBetween(before, after procTimes, elapsed time.Duration) map[string]float64 {
	if before == nil || after == nil || elapsed <= 0 {
		return nil
	}
	cores := map[string]float64{}
	for pid, a := range after {
		d := a.ticks
		if b, ok := before[pid]; ok && b.start == a.start {
			d -= min(b.ticks, a.ticks)
		}
		cores[a.user] += float64(d) / clockTicks / elapsed.Seconds()
	}
	return cores
}

// printCoresTable prints, for every drain row with readings, the median cores each user ran.
func printCoresTable(w io.Writer, r *results, o options) {
	type row struct {
		k     drainKey
		cores map[string]float64
	}
	var rows []row
	for _, d := range o.dbs {
		for _, size := range o.payloads {
			for _, c := range drainCases(o) {
				k := drainKey{db: d.name, size: size, keys: c.keys, relay: c.relay}
				if m := r.medianCores(k); m != nil {
					rows = append(rows, row{k, m})
				}
			}
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "\ncores used during the drains (CPU time of every process on this machine, %d cores, from the relay's go to the last event consumed, over the drain's duration; median of the runs; relaybench is the consumer)\n\n", runtime.NumCPU())
	fmt.Fprintln(w, "| database | payload | keys | relay | relay | brokers | walsender | PostgreSQL backends | relaybench | other | total |")
	fmt.Fprintln(w, "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, x := range rows {
		fmt.Fprintf(w, "| %s | %s | %d | %s |", r.label(x.k.db), sizeLabel(x.k.size), x.k.keys, x.k.relay)
		total := 0.0
		for _, u := range coreUsers {
			fmt.Fprintf(w, " %.2f |", x.cores[u])
			total += x.cores[u]
		}
		fmt.Fprintf(w, " %.2f |\n", total)
	}
}

// medianCores returns the median, user by user, of a row's core readings (nil without any).
func (r *results) medianCores(k drainKey) map[string]float64 {
	var readings []map[string]float64
	for _, s := range r.samples[k] {
		if s.cores != nil {
			readings = append(readings, s.cores)
		}
	}
	if len(readings) == 0 {
		return nil
	}
	out := map[string]float64{}
	for _, u := range coreUsers {
		vals := make([]float64, len(readings))
		for i, m := range readings {
			vals[i] = m[u]
		}
		slices.Sort(vals)
		out[u] = median(vals)
	}
	return out
}
