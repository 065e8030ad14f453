package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// Server says how to run `settle bench-server` (serve with the Instant
// gateway): the binary (normally this one) and what to add to its
// arguments and environment.
type Server struct {
	// Binary is the settle binary; it is run as Binary bench-server ...
	Binary string
	// Args are added after bench-server's own, which are serve's (for
	// example --db-max-conns=8).
	Args []string
	// Env is added to this process's environment (for example GOMAXPROCS=1).
	Env []string
}

// serverProc is one `settle bench-server` subprocess and a client connection to it.
type serverProc struct {
	cmd     *exec.Cmd
	exited  chan struct{}
	addr    string
	logPath string
	conn    *grpc.ClientConn
	// pprofAddr serves the server's profiler, when asked for.
	pprofAddr string
}

// startServer starts `settle bench-server` (serve with the Instant gateway)
// and a reconciler on a free loopback port, against dbURL, logging to a file in
// dir, and waits until its health check says SERVING. With pprof, it also
// serves its profiler on another free loopback port.
func startServer(ctx context.Context, s Server, dbURL, dir, name string, pprof bool) (*serverProc, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	var pprofAddr string
	if pprof {
		if pprofAddr, err = freeAddr(); err != nil {
			return nil, err
		}
	}
	logPath := filepath.Join(dir, name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	// No API keys: the load client is the default merchant, as a
	// benchmark on loopback may be. Every worker's calls share one
	// connection (see dialServer), and serve allows 100 calls open per
	// connection by default: enough for the default points (at most 64
	// workers), but -c goes up to 1024, and past the limit the client would
	// queue calls, measuring the limit rather than Settle.
	args := []string{"bench-server", "--listen", addr, "--with-reconciler=true", "--no-api-keys",
		"--max-concurrent-streams=1100"}
	if pprof {
		args = append(args, "--metrics-listen", pprofAddr, "--pprof")
	}
	args = append(args, s.Args...)
	cmd := exec.Command(s.Binary, args...)
	cmd.Env = append(append(os.Environ(), s.Env...),
		"DATABASE_URL="+dbURL)
	cmd.Stdout, cmd.Stderr = logf, logf
	// The server must not outlive the benchmark, whatever becomes of it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start settle bench-server: %w", err)
	}
	p := &serverProc{cmd: cmd, exited: make(chan struct{}), addr: addr, logPath: logPath, pprofAddr: pprofAddr}
	go func() { cmd.Wait(); close(p.exited) }()
	if p.conn, err = dialServer(addr); err != nil {
		_ = p.stop()
		return nil, err
	}
	if err := p.waitServing(ctx, 60*time.Second); err != nil {
		_ = p.stop()
		return nil, err
	}
	return p, nil
}

// dialServer connects to a Settle server. One HTTP/2 connection carries
// every worker's calls, as a checkout backend's client would.
func dialServer(addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
}

func (p *serverProc) waitServing(ctx context.Context, d time.Duration) error {
	hc := healthpb.NewHealthClient(p.conn)
	deadline := time.Now().Add(d)
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		resp, err := hc.Check(cctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("settle bench-server exited at start: %s", p.logTail())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("settle bench-server did not become SERVING within %s: %s", d, p.logTail())
		}
	}
}

// profile takes a CPU profile of the server for d into path, in the
// background; the channel says how it went.
func (p *serverProc) profile(ctx context.Context, d time.Duration, path string) <-chan error {
	done := make(chan error, 1)
	go func() {
		done <- func() error {
			url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", p.pprofAddr, max(1, int(d.Seconds())))
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return err
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return fmt.Errorf("profile the server: %w", err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("profile the server: %s", resp.Status)
			}
			f, err := os.Create(path)
			if err != nil {
				return err
			}
			if _, err := io.Copy(f, resp.Body); err != nil {
				f.Close()
				return fmt.Errorf("profile the server: %w", err)
			}
			return f.Close()
		}()
	}()
	return done
}

func (p *serverProc) pid() int { return p.cmd.Process.Pid }

// stop stops the server as an orchestrator would (SIGTERM, then SIGKILL
// after the shutdown timeout).
func (p *serverProc) stop() error {
	if p.conn != nil {
		p.conn.Close()
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(20 * time.Second):
		p.cmd.Process.Kill()
		<-p.exited
		return errors.New("settle bench-server did not stop within 20s of SIGTERM; killed it")
	}
	return nil
}

// logTail is the end of the server's log, for error messages.
func (p *serverProc) logTail() string {
	b, _ := os.ReadFile(p.logPath)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}
