package chaos

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	// restartDelay is how soon a process that died on its own (a failpoint,
	// or a start refused while the database was down) is started again.
	restartDelay = 300 * time.Millisecond
	// armTimeout is how long an armed process may run before the harness
	// gives up waiting for its failpoint and starts it again unarmed.
	armTimeout = 15 * time.Second
)

// process is one settle subprocess slot (a replica or a reconciler), kept
// running by its keeper goroutine across kills and restarts. Its output,
// over all its lives, goes to one log file.
type process struct {
	name    string
	args    []string
	env     []string
	bin     string
	logPath string
	h       *harness

	cmds chan command

	mu  sync.Mutex
	cur *instance // nil while down
}

// instance is one life of a process.
type instance struct {
	cmd     *exec.Cmd
	done    chan struct{}
	armed   string
	logFrom int64 // offset of this life's output in the log file
}

type commandKind int

const (
	// cmdKill kills the process (if it runs) and starts it again after
	// down, with arm armed.
	cmdKill commandKind = iota
	// cmdCalm makes sure an unarmed process runs; done is closed once so.
	cmdCalm
)

type command struct {
	kind commandKind
	arm  string
	down time.Duration
	done chan struct{}
}

func newProcess(h *harness, name string, env []string, args ...string) *process {
	return &process{
		name: name, args: args, env: env, bin: h.cfg.Binary,
		logPath: filepath.Join(h.dir, name+".log"), h: h, cmds: make(chan command),
	}
}

// keep runs the process until ctx ends, restarting it whenever it dies and
// carrying out the harness's commands. It kills the process before it
// returns.
func (p *process) keep(ctx context.Context) {
	var (
		arm     string
		startAt time.Time
		calmed  []chan struct{}
	)
	for {
		// Down: wait until it is time to start; commands may move that.
		for wait := time.Until(startAt); wait > 0; wait = time.Until(startAt) {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case c := <-p.cmds:
				switch c.kind {
				case cmdKill: // already down: keep the longer wait, take the arm
					if c.arm != "" {
						arm = c.arm
					}
					if s := time.Now().Add(c.down); s.After(startAt) {
						startAt = s
					}
				case cmdCalm:
					arm, startAt = "", time.Time{}
					calmed = append(calmed, c.done)
				}
			case <-t.C:
			}
			t.Stop()
		}
		if ctx.Err() != nil {
			return
		}
		inst, err := p.spawn(arm)
		if err != nil {
			p.h.logf("%s: start: %v", p.name, err)
			startAt = time.Now().Add(time.Second)
			continue
		}
		if arm == "" {
			for _, ch := range calmed {
				close(ch)
			}
			calmed = nil
		}
		var armed <-chan time.Time
		armTimer := time.NewTimer(armTimeout)
		if arm != "" {
			armed = armTimer.C
		}
		arm = ""

		// Up: wait for the process to die or to be told to kill it.
	up:
		for {
			select {
			case <-ctx.Done():
				armTimer.Stop()
				p.kill(inst, false)
				return
			case <-inst.done:
				if !p.exited(inst) {
					// Refused at start (the database was down), say: the
					// failpoint is still to fire.
					arm = inst.armed
				}
				startAt = time.Now().Add(restartDelay)
				break up
			case <-armed:
				p.h.logf("%s: failpoint %s did not fire within %s; restarting it unarmed", p.name, inst.armed, armTimeout)
				p.kill(inst, true)
				startAt = time.Time{}
				break up
			case c := <-p.cmds:
				switch c.kind {
				case cmdKill:
					p.kill(inst, true)
					arm, startAt = c.arm, time.Now().Add(c.down)
					break up
				case cmdCalm:
					if inst.armed == "" {
						close(c.done)
						continue
					}
					p.kill(inst, true)
					arm, startAt = "", time.Time{}
					calmed = append(calmed, c.done)
					break up
				}
			}
		}
		armTimer.Stop()
	}
}

// spawn starts one life of the process, with failpoint arm armed.
func (p *process) spawn(arm string) (*instance, error) {
	f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fmt.Fprintf(f, "=== chaos: %s starting at +%s, failpoints=%q\n", p.name, p.h.since(), arm)
	off, _ := f.Seek(0, io.SeekEnd)
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = append(append(os.Environ(), p.env...), "SETTLE_FAILPOINTS="+arm)
	cmd.Stdout, cmd.Stderr = f, f
	// The process must not outlive the harness, whatever becomes of it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	inst := &instance{cmd: cmd, done: make(chan struct{}), armed: arm, logFrom: off}
	go func() { cmd.Wait(); close(inst.done) }()
	p.mu.Lock()
	p.cur = inst
	p.mu.Unlock()
	return inst, nil
}

// kill kills inst and waits for it to die. count says whether the kill is
// a fault to be counted; it is only when the process was still alive.
func (p *process) kill(inst *instance, count bool) {
	p.mu.Lock()
	p.cur = nil
	p.mu.Unlock()
	select {
	case <-inst.done:
		return
	default:
	}
	inst.cmd.Process.Signal(syscall.SIGKILL)
	<-inst.done
	if count {
		p.h.count(func(s *Summary) { s.Kills++ })
		p.h.logf("%s: killed", p.name)
	}
}

// exited records a death the harness did not cause: an armed failpoint
// firing, or anything else. It reports whether the failpoint fired.
func (p *process) exited(inst *instance) bool {
	p.mu.Lock()
	p.cur = nil
	p.mu.Unlock()
	ws, _ := inst.cmd.ProcessState.Sys().(syscall.WaitStatus)
	out := p.output(inst)
	if inst.armed != "" && ws.Signaled() && ws.Signal() == syscall.SIGKILL &&
		bytes.Contains(out, []byte("failpoint "+inst.armed+": killing process")) {
		p.h.count(func(s *Summary) {
			s.Kills++
			s.Failpoints[inst.armed]++
		})
		p.h.logf("%s: failpoint %s fired", p.name, inst.armed)
		return true
	}
	p.h.count(func(s *Summary) { s.Exits++ })
	p.h.logf("%s: exited by itself (%s): %s", p.name, inst.cmd.ProcessState, lastLine(out))
	return false
}

// output is what inst has written to the log so far.
func (p *process) output(inst *instance) []byte {
	f, err := os.Open(p.logPath)
	if err != nil {
		return nil
	}
	defer f.Close()
	b, _ := io.ReadAll(io.NewSectionReader(f, inst.logFrom, 1<<30))
	return b
}

// freeze stops the running process for d, then resumes it. It reports
// false when the process was not running.
func (p *process) freeze(ctx context.Context, d time.Duration) bool {
	p.mu.Lock()
	inst := p.cur
	p.mu.Unlock()
	if inst == nil || inst.cmd.Process.Signal(syscall.SIGSTOP) != nil {
		return false
	}
	t := time.NewTimer(d)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
	}
	inst.cmd.Process.Signal(syscall.SIGCONT)
	return true
}

// send delivers a command to the keeper, unless ctx ends first.
func (p *process) send(ctx context.Context, c command) bool {
	select {
	case p.cmds <- c:
		return true
	case <-ctx.Done():
		return false
	}
}

func lastLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}
