package examples

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/delivery"
)

// need checks that the programs an example runs on are installed: without
// one the test is skipped with what to install, and fails when CI=true,
// where .ci/run has installed them all.
func need(t *testing.T, what string, ok bool, install string) {
	t.Helper()
	if ok {
		return
	}
	msg := fmt.Sprintf("%s is missing: %s", what, install)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// needCommand is need for a program on the PATH.
func needCommand(t *testing.T, name, install string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	need(t, name, err == nil, install)
	return path
}

// binDir holds the settle binary once a test has asked for it; TestMain
// removes it.
var binDir string

// settleBinary builds cmd/settle once for the package's tests.
var settleBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "settle-examples-")
	if err != nil {
		return "", err
	}
	binDir = dir
	bin := filepath.Join(dir, "settle")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/settle")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/settle: %w\n%s", err, out)
	}
	return bin, nil
})

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// proc is a process a test started, whose output lines it can wait for.
type proc struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited
	eof  chan struct{} // closed once its last line is read

	mu      sync.Mutex
	lines   []string
	changed chan struct{} // closed and replaced at every new line
}

// start runs cmd (its own process group, so that stopping it stops what
// it started) and collects its stdout and stderr. The test's cleanup
// stops it with SIGTERM, then SIGKILL, and logs its output if the test
// failed.
func start(t *testing.T, name string, cmd *exec.Cmd) *proc {
	t.Helper()
	p := &proc{t: t, name: name, cmd: cmd, done: make(chan struct{}), eof: make(chan struct{}), changed: make(chan struct{})}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	r, w := io.Pipe()
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		defer close(p.eof)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			close(p.changed)
			p.changed = make(chan struct{})
			p.mu.Unlock()
		}
	}()
	go func() {
		_ = cmd.Wait()
		w.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop(syscall.SIGTERM, 20*time.Second)
		if t.Failed() {
			t.Logf("%s's output:\n%s", name, p.output())
		}
	})
	return p
}

// stop sends sig to the process group and waits for the process, at
// most wait before a SIGKILL.
func (p *proc) stop(sig syscall.Signal, wait time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
	select {
	case <-p.done:
	case <-time.After(wait):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// kill ends the process at once, as the kernel's OOM killer or a lost
// machine would: no handler runs.
func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

// waitLine waits for a line (from the from-th on) that match accepts, and
// returns it and its index.
func (p *proc) waitLine(from int, timeout time.Duration, what string, match func(string) bool) (string, int) {
	p.t.Helper()
	deadline := time.After(timeout)
	ended := false
	for {
		p.mu.Lock()
		for i := from; i < len(p.lines); i++ {
			if match(p.lines[i]) {
				l := p.lines[i]
				p.mu.Unlock()
				return l, i
			}
		}
		from = max(from, len(p.lines))
		changed := p.changed
		p.mu.Unlock()
		select {
		case <-changed:
		case <-p.eof:
			// Every line is in: one more look, then give up.
			if !ended {
				ended = true
				continue
			}
			<-p.done
			p.t.Fatalf("%s exited (%v) before %s; its output:\n%s", p.name, p.cmd.ProcessState, what, p.output())
		case <-deadline:
			p.t.Fatalf("%s: no %s within %s; its output:\n%s", p.name, what, timeout, p.output())
		}
	}
}

// logLine is one JSON line of an example's worker or receiver.
type logLine map[string]any

// waitJSON waits for a JSON line whose "msg" is msg and whose fields
// include want, and returns it and its index.
func (p *proc) waitJSON(from int, timeout time.Duration, msg string, want map[string]string) (logLine, int) {
	p.t.Helper()
	var found logLine
	_, i := p.waitLine(from, timeout, fmt.Sprintf("%q line %v", msg, want), func(l string) bool {
		var m logLine
		if json.Unmarshal([]byte(l), &m) != nil || m["msg"] != msg {
			return false
		}
		for k, v := range want {
			if fmt.Sprint(m[k]) != v {
				return false
			}
		}
		found = m
		return true
	})
	return found, i
}

// dev is a settle dev the test started.
type dev struct {
	*proc
	grpcAddr string
	simURL   string
	key      string
	client   settlev1.OrderServiceClient
}

// startDev starts settle dev on free ports with keys of its own, and
// extra flags; it returns once the banner is printed.
func startDev(t *testing.T, extra ...string) *dev {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the examples run against a settle dev of their own, a few seconds each")
	}
	bin, err := settleBinary()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"dev", "-keys-file", filepath.Join(t.TempDir(), "keys"),
		"-listen", freeAddr(t), "-webhook-listen", freeAddr(t), "-metrics-listen", "127.0.0.1:0"}
	// JSON's default is a fixed port, which tests running at once share.
	args = append(args, "-json-listen", "127.0.0.1:0")
	args = append(args, extra...)
	p := start(t, "settle dev", exec.Command(bin, args...))
	p.waitLine(0, 90*time.Second, "the banner's keys", func(l string) bool { return strings.Contains(l, "export SETTLE_OPS_KEY=") })
	banner := p.output()
	d := &dev{proc: p,
		grpcAddr: bannerValue(t, banner, "gRPC:      "),
		simURL:   bannerValue(t, banner, "gateway:   "),
		key:      bannerValue(t, banner, "export SETTLE_KEY="),
	}
	conn, err := grpc.NewClient(d.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	d.client = settlev1.NewOrderServiceClient(conn)
	return d
}

// ctx is a context with dev's checkout key and a deadline.
func (d *dev) ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+d.key)
}

// order returns the order of merchantReference.
func (d *dev) order(t *testing.T, merchantReference string) *settlev1.Order {
	t.Helper()
	res, err := d.client.GetOrder(d.ctx(t), &settlev1.GetOrderRequest{Key: &settlev1.GetOrderRequest_MerchantReference{MerchantReference: merchantReference}})
	if err != nil {
		t.Fatalf("GetOrder %s: %v", merchantReference, err)
	}
	return res.GetOrder()
}

// waitState waits until the order of merchantReference is in state.
func (d *dev) waitState(t *testing.T, merchantReference string, state settlev1.OrderState, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		res, err := d.client.GetOrder(d.ctx(t), &settlev1.GetOrderRequest{Key: &settlev1.GetOrderRequest_MerchantReference{MerchantReference: merchantReference}})
		if err == nil && res.GetOrder().GetState() == state {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("order %s is not %s after %s: %v, %v", merchantReference, state, timeout, res.GetOrder().GetState(), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ledgerCharge is a charge in the simulator's ledger; Description is the
// order's merchant reference.
type ledgerCharge struct {
	ID          string `json:"id"`
	Reference   string `json:"reference"`
	Amount      int64  `json:"amount"`
	Description string `json:"description"`
	Status      string `json:"status"`
}

// charges returns the simulator's charges of merchantReference.
func (d *dev) charges(t *testing.T, merchantReference string) []ledgerCharge {
	t.Helper()
	res, err := http.Get(d.simURL + "/v1/ledger")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var all []ledgerCharge
	if err := json.NewDecoder(res.Body).Decode(&all); err != nil {
		t.Fatalf("the ledger: %v", err)
	}
	var out []ledgerCharge
	for _, c := range all {
		if c.Description == merchantReference {
			out = append(out, c)
		}
	}
	return out
}

// checkOneCharge checks that the simulator charged merchantReference
// exactly once, and that the order is PAID.
func (d *dev) checkOneCharge(t *testing.T, merchantReference string, amount int64) {
	t.Helper()
	d.waitState(t, merchantReference, settlev1.OrderState_ORDER_STATE_PAID, 60*time.Second)
	got := d.charges(t, merchantReference)
	if len(got) != 1 || got[0].Status != "succeeded" || got[0].Amount != amount {
		t.Fatalf("the simulator's charges of %s: %+v; want one succeeded charge of %d", merchantReference, got, amount)
	}
	if o := d.order(t, merchantReference); o.GetCurrentAttemptId() != got[0].Reference {
		t.Errorf("order %s's attempt is %s; the charge's reference is %s", merchantReference, o.GetCurrentAttemptId(), got[0].Reference)
	}
}

// bannerValue returns the word after prefix in the banner.
func bannerValue(t *testing.T, banner, prefix string) string {
	t.Helper()
	_, rest, ok := strings.Cut(banner, prefix)
	if !ok {
		t.Fatalf("no %q in the banner:\n%s", prefix, banner)
	}
	return strings.Fields(rest)[0]
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startRedis starts a redis-server of the test's own on a unix socket in
// a temp dir, with nothing kept on disk, and returns the socket's path.
func startRedis(t *testing.T) string {
	t.Helper()
	bin := needCommand(t, "redis-server", "apt-get install redis-server")
	// A short directory: a unix socket's path has at most 107 bytes.
	dir, err := os.MkdirTemp("", "redis-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "redis.sock")
	p := start(t, "redis-server", exec.Command(bin, "--port", "0", "--unixsocket", sock, "--unixsocketperm", "700",
		"--save", "", "--appendonly", "no", "--dir", dir))
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c, err := net.Dial("unix", sock); err == nil {
			_, _ = c.Write([]byte("PING\r\n"))
			buf := make([]byte, 7)
			_ = c.SetReadDeadline(time.Now().Add(time.Second))
			n, _ := io.ReadFull(c, buf)
			c.Close()
			if string(buf[:n]) == "+PONG\r\n" {
				return sock
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server does not answer on %s; its output:\n%s", sock, p.output())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// recorded is a delivery of settle dev's, as the recording proxy passed
// it on to an example's receiver, and the receiver's answer.
type recorded struct {
	header http.Header
	body   []byte
	status int
}

// paidDelivery starts settle dev with a recording proxy in front of the
// receiver at recvURL as the default merchant's events endpoint (signed
// with secret), charges an order of 19.99 EUR, and returns Settle's
// order.paid delivery as the receiver answered it, and a function that
// posts a delivery to the receiver and returns its status.
func paidDelivery(t *testing.T, recvURL, secret, ref string) (recorded, func(http.Header, []byte) int) {
	t.Helper()
	post := func(h http.Header, body []byte) int {
		req, err := http.NewRequest(http.MethodPost, recvURL, bytes.NewReader(body))
		if err != nil {
			t.Error(err)
			return 0
		}
		req.Header = h.Clone()
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("post to the receiver: %v", err)
			return 0
		}
		res.Body.Close()
		return res.StatusCode
	}
	var (
		mu   sync.Mutex
		seen []recorded
	)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		status := post(r.Header, body)
		mu.Lock()
		seen = append(seen, recorded{header: r.Header.Clone(), body: body, status: status})
		mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(proxy.Close)

	d := startDev(t, "-event-webhooks", "default "+proxy.URL+"/events "+secret)
	if _, err := d.client.CreateAndChargeOrder(d.ctx(t), &settlev1.CreateAndChargeOrderRequest{MerchantReference: ref,
		Amount: &settlev1.Money{Currency: "EUR", AmountMinor: 1999}, PaymentMethod: "tok_ok", RequestId: ref + "-a"}); err != nil {
		t.Fatal(err)
	}
	paid := func() (recorded, bool) {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range seen {
			var ev struct{ Type string }
			if json.Unmarshal(s.body, &ev) == nil && ev.Type == "order.paid" {
				return s, true
			}
		}
		return recorded{}, false
	}
	var got recorded
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var ok bool
		if got, ok = paid(); ok {
			break
		}
		if time.Now().After(deadline) {
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("no order.paid delivery within 30s; deliveries: %d", len(seen))
		}
	}
	if got.status != http.StatusOK {
		t.Fatalf("the receiver answered Settle's delivery %s with %d; want 200", got.header.Get(delivery.HeaderWebhookID), got.status)
	}
	return got, post
}

// exampleCmd is `prog script args...` in an example's directory, with env
// added to the test's environment.
func exampleCmd(dir, prog string, env []string, script string, args ...string) *exec.Cmd {
	cmd := exec.Command(prog, append([]string{script}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	return cmd
}
