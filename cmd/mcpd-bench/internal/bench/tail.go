package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The evidence behind a load's tail (docs/performance.md, "The tail"): its
// latencies over time beside what else ran on the machine at those times.
// It is cheap: the loads keep each call's end time, a sampler reads a few
// /proc files every seriesBucket, and the logs are read after the load.

// seriesBucket is the width of a load's time series and of the sampler's
// period.
const seriesBucket = 100 * time.Millisecond

// Bucket is the calls of a load that ended in one seriesBucket of wall
// clock: how many, and their p99 and longest latency.
type Bucket struct {
	Start time.Time     `json:"t"`
	Calls int           `json:"n"`
	P99   time.Duration `json:"p99_ns"`
	Max   time.Duration `json:"max_ns"`
}

// series buckets the latencies lat of calls that ended at ends (since
// start) by width.
func series(start time.Time, ends, lat []time.Duration, width time.Duration) []Bucket {
	var last time.Duration
	for _, e := range ends {
		last = max(last, e)
	}
	per := make([][]time.Duration, int(last/width)+1)
	for i, e := range ends {
		k := int(e / width)
		per[k] = append(per[k], lat[i])
	}
	out := make([]Bucket, len(per))
	for k, l := range per {
		slices.Sort(l)
		out[k] = Bucket{Start: start.Add(time.Duration(k) * width), Calls: len(l), P99: Quantile(l, 0.99)}
		if len(l) > 0 {
			out[k].Max = l[len(l)-1]
		}
	}
	return out
}

// Sample is what the machine did in one sampler period ending at At, all
// in milliseconds of a period of seriesBucket: CPUSome is the wall-clock
// time some runnable task waited for a CPU (/proc/pressure/cpu), Steal the
// CPU time the hypervisor gave someone else (summed over the virtual
// CPUs); the CPU fields are CPU time used by mcpd, the PostgreSQL processes,
// the driver and the rest of the machine (/proc/stat's busy time less
// ours), and the RunWait fields the time their threads spent runnable but
// not running (/proc/PID/task/*/schedstat, summed over threads).
type Sample struct {
	At              time.Time `json:"t"`
	CPUSome         float64   `json:"cpu_some_ms"`
	Steal           float64   `json:"steal_ms"`
	MCPDCPU         float64   `json:"mcpd_cpu_ms"`
	PostgresCPU     float64   `json:"postgres_cpu_ms"`
	DriverCPU       float64   `json:"driver_cpu_ms"`
	OthersCPU       float64   `json:"others_cpu_ms"`
	MCPDRunWait     float64   `json:"mcpd_runwait_ms"`
	PostgresRunWait float64   `json:"postgres_runwait_ms"`
	DriverRunWait   float64   `json:"driver_runwait_ms"`
	// The Runs fields are the times their threads were put on a CPU: a
	// thread woken up or preempted and run again counts once each time.
	MCPDRuns     float64 `json:"mcpd_runs"`
	PostgresRuns float64 `json:"postgres_runs"`
	DriverRuns   float64 `json:"driver_runs"`
	// DiskBusy is the wall-clock time the data directory's disk had I/O
	// in flight, DiskWrites the writes it completed and DiskWriteWait the
	// time they took, summed (/proc/diskstats).
	DiskBusy      float64 `json:"disk_busy_ms"`
	DiskWrites    float64 `json:"disk_writes"`
	DiskWriteWait float64 `json:"disk_write_wait_ms"`
	// Waits is what PostgreSQL's active client backends waited on at the
	// end of the period (pg_stat_activity), as type:event=count; only in
	// the raw samples.
	Waits string `json:"pg_waits,omitempty"`
}

// sampler samples the machine every seriesBucket until stopped.
type sampler struct {
	stopCh chan struct{}
	done   chan struct{}
	out    []Sample
}

type sampleTotals struct {
	at          time.Time
	some, steal float64
	busy        float64
	mcpd, pg    schedStat
	driver      schedStat
	disk        diskStat
}

// schedStat is CPU time and run-queue wait, in ms, and the times a thread
// was put on a CPU.
type schedStat struct{ cpu, wait, runs float64 }

func (a schedStat) plus(b schedStat) schedStat {
	return schedStat{a.cpu + b.cpu, a.wait + b.wait, a.runs + b.runs}
}

// pgRescan is how many samples go by between two looks for the
// postmaster's children (a pool opens connections as the load needs them).
const pgRescan = 10

// startSampler samples the machine, mcpd (mcpdPID), the PostgreSQL
// processes (the postmaster and its children), the disk disk (its name in
// /proc/diskstats; "" for none) and, with waits, what PostgreSQL's
// backends wait on.
func startSampler(mcpdPID, postmasterPID int, disk string, waits func() string) *sampler {
	s := &sampler{stopCh: make(chan struct{}), done: make(chan struct{})}
	self := os.Getpid()
	var (
		pgPIDs  []int
		pgPrev  = map[int]schedStat{}
		pgTotal schedStat
		n       int
	)
	read := func() sampleTotals {
		t := sampleTotals{at: time.Now(), some: cpuPressureSome(), driver: schedOf(self)}
		t.busy, t.steal = machineMillis()
		t.disk = readDisk(disk)
		if mcpdPID > 0 {
			t.mcpd = schedOf(mcpdPID)
		}
		if postmasterPID > 0 && n%pgRescan == 0 {
			pgPIDs = append(childrenOf(postmasterPID), postmasterPID)
		}
		n++
		// PostgreSQL's processes come and go: t.pg sums what each did since
		// the last sample (a new one, all it did), on top of the last.
		cur := make(map[int]schedStat, len(pgPIDs))
		var delta schedStat
		for _, pid := range pgPIDs {
			st := schedOf(pid)
			if st == (schedStat{}) {
				continue // gone
			}
			cur[pid] = st
			p := pgPrev[pid]
			delta = delta.plus(schedStat{st.cpu - p.cpu, st.wait - p.wait, st.runs - p.runs})
		}
		pgPrev = cur
		pgTotal = pgTotal.plus(delta)
		t.pg = pgTotal
		return t
	}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(seriesBucket)
		defer tick.Stop()
		prev := read()
		for {
			select {
			case <-s.stopCh:
				return
			case <-tick.C:
			}
			cur := read()
			// Scaled to a period of seriesBucket, so that periods that
			// came late compare.
			f := float64(seriesBucket) / float64(cur.at.Sub(prev.at))
			smp := Sample{At: cur.at, CPUSome: f * (cur.some - prev.some), Steal: f * (cur.steal - prev.steal),
				MCPDCPU: f * (cur.mcpd.cpu - prev.mcpd.cpu), PostgresCPU: f * (cur.pg.cpu - prev.pg.cpu),
				DriverCPU:   f * (cur.driver.cpu - prev.driver.cpu),
				MCPDRunWait: f * (cur.mcpd.wait - prev.mcpd.wait), PostgresRunWait: f * (cur.pg.wait - prev.pg.wait),
				DriverRunWait: f * (cur.driver.wait - prev.driver.wait), MCPDRuns: f * (cur.mcpd.runs - prev.mcpd.runs),
				PostgresRuns: f * (cur.pg.runs - prev.pg.runs), DriverRuns: f * (cur.driver.runs - prev.driver.runs)}
			smp.OthersCPU = max(f*(cur.busy-prev.busy)-smp.MCPDCPU-smp.PostgresCPU-smp.DriverCPU, 0)
			smp.DiskBusy, smp.DiskWrites = f*(cur.disk.busy-prev.disk.busy), f*(cur.disk.writes-prev.disk.writes)
			smp.DiskWriteWait = f * (cur.disk.writeWait - prev.disk.writeWait)
			if waits != nil {
				smp.Waits = waits()
			}
			s.out = append(s.out, smp)
			prev = cur
		}
	}()
	return s
}

func (s *sampler) stop() []Sample {
	close(s.stopCh)
	<-s.done
	return s.out
}

// cpuPressureSome is /proc/pressure/cpu's some total, in ms; 0 without PSI.
func cpuPressureSome() float64 {
	b, err := os.ReadFile("/proc/pressure/cpu")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	_, total, ok := strings.Cut(line, "total=")
	if !ok {
		return 0
	}
	us, _ := strconv.ParseFloat(strings.TrimSpace(total), 64)
	return us / 1e3
}

// machineMillis is the machine's busy CPU time (user, nice, system, irq,
// softirq) and steal time so far, in ms.
func machineMillis() (busy, steal float64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0
	}
	for i, v := range f[1:9] { // user nice system idle iowait irq softirq steal
		n, _ := strconv.ParseFloat(v, 64)
		switch i {
		case 3, 4:
		case 7:
			steal = n * 1000 / clockTicks
		default:
			busy += n * 1000 / clockTicks
		}
	}
	return busy, steal
}

// schedOf is the CPU time and run-queue wait of the threads of pid so far
// and the times they were put on a CPU (each thread's schedstat).
func schedOf(pid int) schedStat {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "task")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return schedStat{}
	}
	var st schedStat
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "schedstat"))
		if err != nil {
			continue
		}
		if f := strings.Fields(string(b)); len(f) >= 3 {
			cpu, _ := strconv.ParseFloat(f[0], 64)
			wait, _ := strconv.ParseFloat(f[1], 64)
			runs, _ := strconv.ParseFloat(f[2], 64)
			st = st.plus(schedStat{cpu / 1e6, wait / 1e6, runs})
		}
	}
	return st
}

// diskStat is a disk's completed writes, the time they took and the time
// it was busy, in ms, from /proc/diskstats.
type diskStat struct{ writes, writeWait, busy float64 }

func readDisk(name string) diskStat {
	if name == "" {
		return diskStat{}
	}
	b, err := os.ReadFile("/proc/diskstats")
	if err != nil {
		return diskStat{}
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 13 || f[2] != name {
			continue
		}
		num := func(i int) float64 { n, _ := strconv.ParseFloat(f[i], 64); return n }
		return diskStat{writes: num(7), writeWait: num(10), busy: num(12)}
	}
	return diskStat{}
}

// diskOf is the name in /proc/diskstats of the whole disk that holds path:
// the partition's parent when it is a partition.
func diskOf(path string) string {
	var st syscall.Stat_t
	if syscall.Stat(path, &st) != nil {
		return ""
	}
	major, minor := (st.Dev>>8)&0xfff, (st.Dev&0xff)|((st.Dev>>12)&0xfff00)
	// Stat_t.Dev is uint64 on linux/amd64, another type elsewhere.
	link, err := os.Readlink("/sys/dev/block/" + strconv.FormatUint(uint64(major), 10) + ":" + strconv.FormatUint(uint64(minor), 10)) //nolint:unconvert // not uint64 on every platform

	if err != nil {
		return ""
	}
	name := filepath.Base(link)
	if _, err := os.Stat(filepath.Join("/sys/class/block", name, "partition")); err == nil {
		return filepath.Base(filepath.Dir(link))
	}
	return name
}

// childrenOf is the processes whose parent is pid.
func childrenOf(pid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if c, err := strconv.Atoi(e.Name()); err == nil && parentOf(c) == pid {
			out = append(out, c)
		}
	}
	return out
}

// Event is something that ran at a time and for a while: a garbage
// collection, a checkpoint, a slow statement, a sweep.
type Event struct {
	At     time.Time     `json:"t"`
	Length time.Duration `json:"length_ns"`
	Source string        `json:"source"`
	What   string        `json:"what"`
}

func (e Event) end() time.Time { return e.At.Add(e.Length) }

// logLines yields the lines of a log file (none when it cannot be read).
func logLines(logFile string) iter.Seq[string] {
	return func(yield func(string) bool) {
		f, err := os.Open(logFile)
		if err != nil {
			return
		}
		defer func() { _ = f.Close() }()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if !yield(sc.Text()) {
				return
			}
		}
	}
}

// gctraceLine matches a line of GODEBUG=gctrace=1: the cycle, its start
// since the process started, and the wall clock of its phases (STW sweep
// termination, concurrent mark, STW mark termination).
var gctraceLine = regexp.MustCompile(`^gc (\d+) @([0-9.]+)s [0-9]+%: ([0-9.]+)\+([0-9.]+)\+([0-9.]+) ms clock`)

// gcEvents reads the gctrace lines of a log whose process started at
// started, and returns the collections that began in [from, to].
func gcEvents(logFile, source string, started, from, to time.Time) []Event {
	var out []Event
	for line := range logLines(logFile) {
		m := gctraceLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		at := started.Add(seconds(m[2]))
		if at.Before(from) || at.After(to) {
			continue
		}
		stw1, mark, stw2 := millisOf(m[3]), millisOf(m[4]), millisOf(m[5])
		out = append(out, Event{At: at, Length: stw1 + mark + stw2, Source: source,
			What: "gc " + m[1] + ": pauses " + fmtMillis(stw1) + "+" + fmtMillis(stw2) + " ms, mark " + fmtMillis(mark) + " ms"})
	}
	return out
}

func seconds(s string) time.Duration {
	f, _ := strconv.ParseFloat(s, 64)
	return time.Duration(f * float64(time.Second))
}

func millisOf(s string) time.Duration {
	f, _ := strconv.ParseFloat(s, 64)
	return time.Duration(f * float64(time.Millisecond))
}

func fmtMillis(d time.Duration) string { return strconv.FormatFloat(millis(d), 'f', 2, 64) }

// driverGCEvents is the driver's own stop-the-world pauses in [from, to],
// from the runtime's record of its last 256.
func driverGCEvents(from, to time.Time) []Event {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	var out []Event
	for i := range min(ms.NumGC, 256) {
		k := (ms.NumGC - 1 - i) % 256
		end := time.Unix(0, int64(ms.PauseEnd[k]))
		length := time.Duration(ms.PauseNs[k])
		at := end.Add(-length)
		if end.Before(from) || at.After(to) {
			continue
		}
		out = append(out, Event{At: at, Length: length, Source: "driver-gc", What: "pause " + fmtMillis(length) + " ms"})
	}
	slices.SortFunc(out, func(a, b Event) int { return a.At.Compare(b.At) })
	return out
}

// pgLogLine matches a line of PostgreSQL's log with its default prefix
// ("%m [%p] "): the time, the level and the message.
var pgLogLine = regexp.MustCompile(`^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} \w+) \[\d+\] (\w+):\s+(.*)$`)

// pgDuration matches log_min_duration_statement's "duration: 12.345 ms".
var pgDuration = regexp.MustCompile(`^duration: ([0-9.]+) ms`)

// postgresEvents reads PostgreSQL's log for what it logged in [from, to]:
// checkpoints, autovacuum and autoanalyze runs, slow statements and lock
// waits. A slow statement's event starts when it started.
func postgresEvents(logFile string, from, to time.Time) []Event {
	var out []Event
	for line := range logLines(logFile) {
		m := pgLogLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		at, err := time.Parse("2006-01-02 15:04:05.000 MST", m[1])
		if err != nil {
			continue
		}
		msg := m[3]
		var length time.Duration
		if d := pgDuration.FindStringSubmatch(msg); d != nil {
			length = millisOf(d[1])
			at = at.Add(-length)
		}
		if at.Add(length).Before(from) || at.After(to) {
			continue
		}
		if len(msg) > 160 {
			msg = msg[:160] + "..."
		}
		out = append(out, Event{At: at, Length: length, Source: "postgres", What: m[2] + ": " + msg})
	}
	return out
}

// isHeartbeatLine reports whether msg is one of the registrar's per
// heartbeat lines (first, status change, debug).
func isHeartbeatLine(msg string) bool {
	return msg == "heartbeat" || msg == "first heartbeat" || msg == "heartbeat changed status"
}

// mcpdEvents reads mcpd's JSON log for the lines in [from, to] that are not
// a heartbeat's or a request's: sweeps, warnings, errors.
func mcpdEvents(logFile string, from, to time.Time) []Event {
	var out []Event
	for text := range logLines(logFile) {
		line := []byte(text)
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var rec struct {
			Time  time.Time `json:"time"`
			Level string    `json:"level"`
			Msg   string    `json:"msg"`
		}
		if json.Unmarshal(line, &rec) != nil || isHeartbeatLine(rec.Msg) || rec.Time.Before(from) || rec.Time.After(to) {
			continue
		}
		what := string(line)
		if len(what) > 200 {
			what = what[:200] + "..."
		}
		out = append(out, Event{At: rec.Time, Source: "mcpd-log", What: what})
	}
	return out
}

// Stall is one bucket of a load whose longest call took at least
// stallThreshold, with what the machine did meanwhile and the events that
// overlapped the window of its calls (from the bucket's start less its
// longest latency to its end).
type Stall struct {
	Bucket
	// Machine is the sampler's periods that overlap the window, averaged.
	Machine Sample  `json:"machine"`
	Events  []Event `json:"events,omitempty"`
}

// stallThreshold is the latency that makes a bucket a stall.
const stallThreshold = 20 * time.Millisecond

// TailReport is the evidence of one load's tail: its stalls, and how often
// each source of events overlaps a stall against how often it overlaps any
// bucket (a source that causes the stalls overlaps nearly all of them,
// however seldom it runs).
type TailReport struct {
	Buckets int     `json:"buckets"`
	Stalls  []Stall `json:"stalls"`
	// Overlap is, per source, the share of stall windows and the share of
	// all bucket windows that an event of the source overlaps.
	Overlap map[string][2]float64 `json:"overlap_stalls_all"`
	// Machine is the sampler's totals over the load, and StallMachine the
	// same per stall window, averaged: what the machine did at the stalls
	// against what it did on the whole.
	Machine      Sample `json:"machine_per_bucket"`
	StallMachine Sample `json:"machine_per_stall"`
	// Above is, per latency bound (ms), the share of the load's calls
	// that took longer as the driver timed them and as mcpd timed them
	// (its request histogram, from handler to answer written): what the
	// driver sees beyond mcpd's own time was spent in the sockets and the
	// run queues between them, or in the driver.
	Above   map[string][2]float64 `json:"above_driver_mcpd,omitempty"`
	Series  []Bucket              `json:"series"`
	Samples []Sample              `json:"samples"`
}

// maxStalls bounds the stalls a report lists (the longest first).
const maxStalls = 40

// analyseTail builds the tail report of a load's series with the sampler's
// samples and the events.
func analyseTail(buckets []Bucket, samples []Sample, events []Event) TailReport {
	rep := TailReport{Buckets: len(buckets), Overlap: map[string][2]float64{}, Series: buckets, Samples: samples}
	window := func(b Bucket) (time.Time, time.Time) {
		return b.Start.Add(-b.Max), b.Start.Add(seriesBucket)
	}
	sources := map[string]bool{}
	for _, e := range events {
		sources[e.Source] = true
	}
	overlaps := func(b Bucket, source string) bool {
		from, to := window(b)
		for _, e := range events {
			if e.Source == source && !e.end().Before(from) && !e.At.After(to) {
				return true
			}
		}
		return false
	}
	stalls := []Stall{} // [] rather than null in the report
	busy := 0
	for _, b := range buckets {
		if b.Calls == 0 {
			continue
		}
		busy++
		if b.Max < stallThreshold {
			continue
		}
		from, to := window(b)
		st := Stall{Bucket: b}
		n := 0
		for _, s := range samples {
			if s.At.After(from) && !s.At.Add(-seriesBucket).After(to) {
				st.Machine = addSample(st.Machine, s)
				n++
			}
		}
		st.Machine = scaleSample(st.Machine, n)
		for _, e := range events {
			if !e.end().Before(from) && !e.At.After(to) {
				st.Events = append(st.Events, e)
			}
		}
		stalls = append(stalls, st)
	}
	for source := range sources {
		var inStalls, inAll int
		for _, b := range buckets {
			if b.Calls == 0 || !overlaps(b, source) {
				continue
			}
			inAll++
			if b.Max >= stallThreshold {
				inStalls++
			}
		}
		rep.Overlap[source] = [2]float64{share(inStalls, len(stalls)), share(inAll, busy)}
	}
	for _, s := range samples {
		rep.Machine = addSample(rep.Machine, s)
	}
	rep.Machine = scaleSample(rep.Machine, len(samples))
	for _, st := range stalls {
		rep.StallMachine = addSample(rep.StallMachine, st.Machine)
	}
	rep.StallMachine = scaleSample(rep.StallMachine, len(stalls))
	slices.SortFunc(stalls, func(a, b Stall) int { return int(b.Max - a.Max) })
	rep.Stalls = stalls[:min(len(stalls), maxStalls)]
	return rep
}

func share(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return float64(n) / float64(of)
}

func addSample(a, b Sample) Sample {
	return Sample{At: b.At, CPUSome: a.CPUSome + b.CPUSome, Steal: a.Steal + b.Steal,
		MCPDCPU: a.MCPDCPU + b.MCPDCPU, PostgresCPU: a.PostgresCPU + b.PostgresCPU, DriverCPU: a.DriverCPU + b.DriverCPU,
		OthersCPU: a.OthersCPU + b.OthersCPU, MCPDRunWait: a.MCPDRunWait + b.MCPDRunWait,
		PostgresRunWait: a.PostgresRunWait + b.PostgresRunWait, DriverRunWait: a.DriverRunWait + b.DriverRunWait,
		MCPDRuns: a.MCPDRuns + b.MCPDRuns, PostgresRuns: a.PostgresRuns + b.PostgresRuns, DriverRuns: a.DriverRuns + b.DriverRuns,
		DiskBusy: a.DiskBusy + b.DiskBusy, DiskWrites: a.DiskWrites + b.DiskWrites, DiskWriteWait: a.DiskWriteWait + b.DiskWriteWait}
}

func scaleSample(s Sample, n int) Sample {
	if n == 0 {
		return Sample{}
	}
	f := 1 / float64(n)
	return Sample{At: s.At, CPUSome: f * s.CPUSome, Steal: f * s.Steal, MCPDCPU: f * s.MCPDCPU, PostgresCPU: f * s.PostgresCPU,
		DriverCPU: f * s.DriverCPU, OthersCPU: f * s.OthersCPU, MCPDRunWait: f * s.MCPDRunWait,
		PostgresRunWait: f * s.PostgresRunWait, DriverRunWait: f * s.DriverRunWait,
		MCPDRuns: f * s.MCPDRuns, PostgresRuns: f * s.PostgresRuns, DriverRuns: f * s.DriverRuns,
		DiskBusy: f * s.DiskBusy, DiskWrites: f * s.DiskWrites, DiskWriteWait: f * s.DiskWriteWait}
}

// tailProbe watches one load: start it before, finish it after.
type tailProbe struct {
	mcpd    *MCPD
	pgLog   string
	sampler *sampler
	from    time.Time
	hist0   map[string]float64
}

func startTailProbe(m *MCPD, pgLog, pgDir string, postmasterPID int, waits func() string) *tailProbe {
	hist, _ := heartbeatHistogram(m.URL)
	return &tailProbe{mcpd: m, pgLog: pgLog, from: time.Now(), hist0: hist,
		sampler: startSampler(m.PID(), postmasterPID, diskOf(pgDir), waits)}
}

// finish stops the sampler and builds the report of res's tail.
func (p *tailProbe) finish(res LoadResult) TailReport {
	samples := p.sampler.stop()
	hist, histErr := heartbeatHistogram(p.mcpd.URL)
	to := time.Now()
	from := p.from.Add(-time.Second) // a pause that began before and reached in
	var events []Event
	events = append(events, gcEvents(p.mcpd.Log, "mcpd-gc", p.mcpd.Started, from, to)...)
	events = append(events, driverGCEvents(from, to)...)
	events = append(events, postgresEvents(p.pgLog, from, to)...)
	events = append(events, mcpdEvents(p.mcpd.Log, from, to)...)
	rep := analyseTail(res.Series, samples, events)
	if histErr == nil && p.hist0 != nil {
		rep.Above = aboveBounds(res.Above, p.hist0, hist)
	}
	return rep
}

// heartbeatHistogram reads mcpd's histogram of the heartbeat's successful
// requests: the cumulative count per bound (le, as written), "+Inf"
// included.
func heartbeatHistogram(baseURL string) (map[string]float64, error) {
	hc := &http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get(baseURL + "/metrics")
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "mcpd_http_request_duration_seconds_bucket{") ||
			!strings.Contains(line, `code="200"`) || !strings.Contains(line, `route="POST /v1/mcp/servers/heartbeat"`) {
			continue
		}
		_, rest, _ := strings.Cut(line, `le="`)
		le, rest, _ := strings.Cut(rest, `"`)
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		n, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return nil, err
		}
		out[le] = n
	}
	return out, sc.Err()
}

// tailBounds are the latency bounds at which the driver's and mcpd's
// timings are compared: bounds of mcpd's request histogram.
var tailBounds = []time.Duration{10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond}

// aboveBounds is, per bound of tailBounds, the share of calls longer than
// it as the driver timed them (driver, per bound) and as mcpd timed them
// (the histogram's difference between before and after).
func aboveBounds(driver []float64, before, after map[string]float64) map[string][2]float64 {
	total := after["+Inf"] - before["+Inf"]
	if total <= 0 || len(driver) != len(tailBounds) {
		return nil
	}
	out := map[string][2]float64{}
	for i, b := range tailBounds {
		le := strconv.FormatFloat(b.Seconds(), 'g', -1, 64)
		out[strconv.FormatInt(b.Milliseconds(), 10)+"ms"] = [2]float64{driver[i], 1 - (after[le]-before[le])/total}
	}
	return out
}

// pgWaitsSQL counts PostgreSQL's active client backends by what they wait
// on ("CPU" when on none).
const pgWaitsSQL = `SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU'), count(*)
	FROM pg_stat_activity WHERE backend_type = 'client backend' AND state = 'active' AND pid <> pg_backend_pid()
	GROUP BY 1 ORDER BY 2 DESC`

// pgWaits samples what PostgreSQL's backends wait on, through pool, within
// half a sampler period.
func pgWaits(pool *pgxpool.Pool) func() string {
	return func() string {
		ctx, cancel := context.WithTimeout(context.Background(), seriesBucket/2)
		defer cancel()
		rows, err := pool.Query(ctx, pgWaitsSQL)
		if err != nil {
			return "error"
		}
		defer rows.Close()
		var parts []string
		for rows.Next() {
			var (
				what string
				n    int
			)
			if rows.Scan(&what, &n) == nil {
				parts = append(parts, what+"="+strconv.Itoa(n))
			}
		}
		return strings.Join(parts, ",")
	}
}
