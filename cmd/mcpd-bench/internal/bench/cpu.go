package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/PID/stat's CPU times: 100 on
// every Linux that Go runs on.
const clockTicks = 100

// CPUSnapshot is the CPU time used so far by the server under load (mcpd,
// etcd), by every postgres process, by this process (the load driver), and
// by the whole machine.
type CPUSnapshot struct {
	at       time.Time
	server   float64
	postgres float64
	self     float64
	machine  float64
}

// CPUUse is the cores each side used between two snapshots.
type CPUUse struct {
	Server   float64 `json:"server_cores"`
	Postgres float64 `json:"postgres_cores"`
	Driver   float64 `json:"driver_cores"`
	// Others is what the rest of the machine used meanwhile (other
	// programs on a shared machine).
	Others float64 `json:"others_cores"`
}

// TakeCPUSnapshot reads the CPU times of the server process serverPID (0:
// none) and of the PostgreSQL cluster whose postmaster is postmasterPID (0:
// none): the postmaster, the backends it reaped, and its children now.
// Other clusters on the machine count as the rest of the machine.
func TakeCPUSnapshot(serverPID, postmasterPID int) CPUSnapshot {
	s := CPUSnapshot{at: time.Now(), self: procCPU(os.Getpid()), machine: machineCPU()}
	if serverPID > 0 {
		s.server = procCPU(serverPID)
	}
	if postmasterPID <= 0 {
		return s
	}
	s.postgres = procCPU(postmasterPID)
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == postmasterPID {
			continue
		}
		if parentOf(pid) == postmasterPID {
			s.postgres += procCPU(pid)
		}
	}
	return s
}

// parentOf is the parent process id of pid (0 when it cannot be read).
func parentOf(pid int) int {
	f := statFields(pid)
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// statFields are the fields of /proc/PID/stat after the command name.
func statFields(pid int) []string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(s[i+1:])
}

// Since is the cores used from earlier to s.
func (s CPUSnapshot) Since(earlier CPUSnapshot) CPUUse {
	wall := s.at.Sub(earlier.at).Seconds()
	if wall <= 0 {
		return CPUUse{}
	}
	u := CPUUse{
		Server:   (s.server - earlier.server) / wall,
		Postgres: (s.postgres - earlier.postgres) / wall,
		Driver:   (s.self - earlier.self) / wall,
	}
	u.Others = max((s.machine-earlier.machine)/wall-u.Server-u.Postgres-u.Driver, 0)
	return u
}

// Describe says the cores of each side, the server named server.
func (u CPUUse) Describe(server string) string {
	s := "CPU cores: "
	if server != "" {
		s += fmt.Sprintf("%s %.2f, ", server, u.Server)
	}
	return s + fmt.Sprintf("PostgreSQL %.2f, driver %.2f, rest of the machine %.2f", u.Postgres, u.Driver, u.Others)
}

// procCPU is the user+system seconds of pid and of its children that it
// has waited for (0 when it cannot be read): a PostgreSQL backend that ends
// between two snapshots moves its time to the postmaster's children, and
// pgbench's to the driver's.
func procCPU(pid int) float64 {
	f := statFields(pid)
	// state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14).
	if len(f) < 15 {
		return 0
	}
	var ticks float64
	for _, v := range f[11:15] {
		n, _ := strconv.ParseFloat(v, 64)
		ticks += n
	}
	return ticks / clockTicks
}

// machineCPU is the busy seconds of every CPU, from /proc/stat.
func machineCPU() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0
	}
	var busy float64
	for i, v := range f[1:9] { // user nice system idle iowait irq softirq steal
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, _ := strconv.ParseFloat(v, 64)
		busy += n
	}
	return busy / clockTicks
}

// PerCall is the CPU microseconds of each side per call, calls made in the
// interval of u lasting elapsed.
func (u CPUUse) PerCall(calls int64, elapsed time.Duration) (server, postgres float64) {
	if calls <= 0 {
		return 0, 0
	}
	perCall := elapsed.Seconds() / float64(calls) * 1e6
	return u.Server * perCall, u.Postgres * perCall
}

// PostgresCPUByKind is the CPU seconds so far of each kind of the
// PostgreSQL processes whose postmaster is postmasterPID: "postmaster"
// (with the backends it reaped), each background process by its title
// (walwriter, checkpointer, autovacuum worker, ...), and client backends
// as "backend <role>".
func PostgresCPUByKind(postmasterPID int) map[string]float64 {
	out := map[string]float64{"postmaster": procCPU(postmasterPID)}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == postmasterPID || parentOf(pid) != postmasterPID {
			continue
		}
		b, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		out[postgresKind(string(b))] += procCPU(pid)
	}
	return out
}

// postgresKind names a PostgreSQL process by its title (its cmdline).
func postgresKind(title string) string {
	title = strings.TrimSpace(strings.ReplaceAll(title, "\x00", " "))
	title = strings.TrimPrefix(title, "postgres: ")
	f := strings.Fields(title)
	switch {
	case len(f) == 0:
		return "unknown"
	case strings.Contains(title, "(") || strings.Contains(title, "[local]"):
		return "backend " + f[0]
	case f[0] == "autovacuum" || f[0] == "logical" || f[0] == "background":
		if len(f) > 1 {
			return f[0] + " " + f[1]
		}
	}
	return f[0]
}

// postgresCPUSince is the cores each kind used from earlier to now over
// wall seconds, and the processes that exited meanwhile counted by kind
// "postmaster".
func postgresCPUSince(now, earlier map[string]float64, wall float64) map[string]float64 {
	out := map[string]float64{}
	if wall <= 0 {
		return out
	}
	for k, v := range now {
		if d := (v - earlier[k]) / wall; d > 0 {
			out[k] = d
		}
	}
	return out
}

// describePostgresCPU says the largest kinds' CPU per call, of calls made
// over wall seconds, from cores.
func describePostgresCPU(cores map[string]float64, calls int64, wall float64) string {
	if calls <= 0 || len(cores) == 0 {
		return ""
	}
	type kv struct {
		k string
		v float64
	}
	var kinds []kv
	for k, v := range cores {
		kinds = append(kinds, kv{k, v})
	}
	sort.Slice(kinds, func(i, j int) bool { return kinds[i].v > kinds[j].v })
	var parts []string
	for i, x := range kinds {
		if i == 5 {
			break
		}
		parts = append(parts, fmt.Sprintf("%s %.0f µs", x.k, x.v*wall/float64(calls)*1e6))
	}
	return "PostgreSQL CPU per heartbeat by process: " + strings.Join(parts, ", ")
}
