package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTick is the unit of the CPU times in /proc: USER_HZ, which is 100
// on every Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

// procStat is what /proc/<pid>/stat says of a process's CPU.
type procStat struct {
	ppid int
	// cpu is user + system time; children is the same for its children
	// that it has waited for.
	cpu, children time.Duration
}

func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	// The command name, in parentheses, may hold spaces and parentheses:
	// the fields that follow start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	// f[0] is field 3 (state) of proc(5): ppid is field 4, utime to cstime
	// are fields 14 to 17.
	n := func(j int) int64 { v, _ := strconv.ParseInt(f[j], 10, 64); return v }
	return procStat{
		ppid:     int(n(1)),
		cpu:      time.Duration(n(11)+n(12)) * clockTick,
		children: time.Duration(n(13)+n(14)) * clockTick,
	}, nil
}

// procCPU returns the CPU time pid has used.
func procCPU(pid int) (time.Duration, error) {
	st, err := readProcStat(pid)
	return st.cpu, err
}

// treeCPU returns the CPU time used by pid and all its children, those
// that have exited (and been waited for) included. It is how PostgreSQL's
// CPU is measured: the postmaster reaps every backend when it exits.
func treeCPU(pid int) (time.Duration, error) {
	root, err := readProcStat(pid)
	if err != nil {
		return 0, err
	}
	total := root.cpu + root.children
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil || child == pid {
			continue
		}
		st, err := readProcStat(child)
		if err != nil || st.ppid != pid {
			continue // gone, or not ours
		}
		total += st.cpu
	}
	return total, nil
}

// procMemory returns a process's resident set size now and its peak
// (VmRSS and VmHWM), in bytes.
func procMemory(pid int) (rss, hwm int64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/%d/status: %s: %w", pid, k, err)
		}
		if k == "VmRSS" {
			rss = kb << 10
		} else {
			hwm = kb << 10
		}
	}
	if err := sc.Err(); err != nil {
		return 0, 0, err
	}
	if rss == 0 {
		return 0, 0, fmt.Errorf("/proc/%d/status has no VmRSS", pid)
	}
	return rss, hwm, nil
}

// selfCPU returns the CPU time this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// machineCPU returns the CPU time the whole machine has spent busy (not
// idle, not waiting for I/O), summed over its CPUs.
func machineCPU() (time.Duration, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return 0, errors.New("/proc/stat: unexpected format")
	}
	var busy int64
	for i, s := range f[1:] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		if i >= 8 { // guest time is already in user
			break
		}
		v, _ := strconv.ParseInt(s, 10, 64)
		busy += v
	}
	return time.Duration(busy) * clockTick, nil
}

// postmasterPID reads the PID of the PostgreSQL server whose data
// directory is dataDir.
func postmasterPID(dataDir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0, fmt.Errorf("find the PostgreSQL server's PID: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strconv.Atoi(strings.TrimSpace(line))
}

// loadAverage returns the one-minute load average.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
