package grpcapi_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/grpcapi"
	"github.com/settlepay/settle/internal/telemetry"
)

// The tests of this file flood a server the way an attacker without a key
// would, over real sockets (raw HTTP/2 where a gRPC client would refuse to
// misbehave), and check that the server stays healthy: a health check on a
// connection of its own answers within healthBound throughout.
//
// The bound is about the server under test, so nothing else in this process
// may compete with it for the CPU while it is measured: the tests that probe
// health are not parallel (Go runs them alone, before the parallel tests of
// the package are released), and the attackers encode their floods before
// they start and write them in large chunks, which costs them little CPU.

// healthBound is the slowest health check allowed during a flood, counted
// in the CPU time the machine gave this process (see cpuLatency). The floods
// these tests guard against locked clients out for minutes; the bound is
// loose enough that a busy CI machine (GC, the attacker's own encoding) does
// not cross it, and the slowest check is logged as the figure.
const healthBound = time.Second

// processCPU is the CPU time this process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuLatency is how long a check that took wall time and used cpu of the
// process's CPU time would have taken had the process had the machine to
// itself: the CPU time spread over the GOMAXPROCS threads that run Go code,
// and never more than the wall time. A flood that starves the health check
// in the server keeps the process busy, so its checks count in full; the
// time other processes (the other packages' tests, a loaded CI machine)
// kept this one off the CPU does not count, for it says nothing about the
// server. A check the server makes wait without using the CPU is caught by
// the check's own timeout.
func cpuLatency(wall, cpu time.Duration) time.Duration {
	return min(wall, cpu/time.Duration(runtime.GOMAXPROCS(0)))
}

// healthProbe checks health on its own connection, every 10ms, until stop.
type healthProbe struct {
	stopped chan struct{}
	done    chan struct{}
	// checked is closed when the first check after startHealthProbe
	// returned has answered.
	checked chan struct{}
	slowest time.Duration
	checks  int
	err     error
}

// startHealthProbe connects a health client to addr and starts checking.
// It must be called before the flood starts: every check it counts starts
// after it was called.
func startHealthProbe(t *testing.T, addr string) *healthProbe {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	hc := healthpb.NewHealthClient(conn)
	check := func() (time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		start, cpu := time.Now(), processCPU()
		_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		return cpuLatency(time.Since(start), processCPU()-cpu), err
	}
	if _, err := check(); err != nil { // connected before the flood
		t.Fatal(err)
	}
	p := &healthProbe{stopped: make(chan struct{}), done: make(chan struct{}), checked: make(chan struct{})}
	go func() {
		defer close(p.done)
		defer conn.Close()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			d, err := check()
			if err != nil && p.err == nil {
				p.err = err
			}
			p.slowest = max(p.slowest, d)
			if p.checks++; p.checks == 1 {
				close(p.checked)
			}
			select {
			case <-p.stopped:
				return
			case <-tick.C:
			}
		}
	}()
	return p
}

// stop ends the probe and fails the test if a check failed or was slow. It
// first waits for a check to have answered, so that a flood shorter than the
// probe's first check, or one during which the probe was not scheduled, is
// still checked rather than reported as no check at all.
func (p *healthProbe) stop(t *testing.T) {
	t.Helper()
	select {
	case <-p.checked:
	case <-time.After(30 * time.Second):
	}
	close(p.stopped)
	<-p.done
	if p.err != nil {
		t.Errorf("health check during the flood: %v", p.err)
	}
	if p.checks == 0 {
		t.Errorf("no health check answered in 30s")
	}
	if p.slowest >= healthBound {
		t.Errorf("slowest of %d health checks during the flood: %s, want under %s", p.checks, p.slowest, healthBound)
	}
	t.Logf("%d health checks during the flood, slowest %s", p.checks, p.slowest)
}

// h2conn is a raw HTTP/2 client connection: it sends what it is told,
// whatever the server's settings say.
type h2conn struct {
	conn   net.Conn
	fr     *http2.Framer
	wmu    sync.Mutex
	hbuf   bytes.Buffer
	enc    *hpack.Encoder
	frames chan frame    // the frames read that tests look at
	ended  chan struct{} // closed when reading fails (EOF, reset)
	// settings is closed when the server's first SETTINGS frame arrives.
	settings chan struct{}
}

// frame is what a test needs of a frame read: the framer reuses its own.
type frame struct {
	kind   string // "headers", "data", "rst", "goaway" or "pingack"
	stream uint32
	status string // grpc-status of a trailers frame
}

// dialH2 connects and sends the client preface and empty SETTINGS, and
// starts reading. It does not wait for the server's SETTINGS.
func dialH2(t *testing.T, addr string) *h2conn {
	t.Helper()
	return dialH2From(t, addr, "")
}

// dialH2From is dialH2 from the local IP from ("" for any): on Linux,
// every address of 127/8 is loopback, so that tests can be several
// clients.
func dialH2From(t *testing.T, addr, from string) *h2conn {
	t.Helper()
	conn, err := dialerFrom(from).Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	h := &h2conn{conn: conn, fr: http2.NewFramer(conn, conn), frames: make(chan frame, 1<<16),
		ended: make(chan struct{}), settings: make(chan struct{})}
	h.enc = hpack.NewEncoder(&h.hbuf)
	h.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	// A server that closes the connection at once (past a limit) may do so
	// before these are written: the reader then ends, which tests check.
	if _, err := conn.Write([]byte(http2.ClientPreface)); err == nil {
		_ = h.fr.WriteSettings()
	}
	go func() {
		defer close(h.ended)
		gotSettings := false
		for {
			f, err := h.fr.ReadFrame()
			if err != nil {
				return
			}
			if s, ok := f.(*http2.SettingsFrame); ok && !s.IsAck() && !gotSettings {
				gotSettings = true
				close(h.settings)
			}
			var fr frame
			switch f := f.(type) {
			case *http2.MetaHeadersFrame:
				fr = frame{kind: "headers", stream: f.StreamID, status: grpcStatus(f)}
			case *http2.DataFrame:
				fr = frame{kind: "data", stream: f.StreamID}
			case *http2.RSTStreamFrame:
				fr = frame{kind: "rst", stream: f.StreamID}
			case *http2.GoAwayFrame:
				fr = frame{kind: "goaway"}
			case *http2.PingFrame:
				if !f.IsAck() {
					continue
				}
				fr = frame{kind: "pingack"}
			default:
				continue
			}
			select {
			case h.frames <- fr:
			default:
			}
		}
	}()
	return h
}

// headers sends a HEADERS frame opening stream id to a gRPC method, with
// extra header fields.
func (h *h2conn) headers(id uint32, method string, endStream bool, extra ...hpack.HeaderField) error {
	h.wmu.Lock()
	defer h.wmu.Unlock()
	h.hbuf.Reset()
	for _, f := range append([]hpack.HeaderField{
		{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
		{Name: ":path", Value: method}, {Name: ":authority", Value: "settle"},
		{Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"},
	}, extra...) {
		_ = h.enc.WriteField(f)
	}
	block := h.hbuf.Bytes()
	const frag = 16 << 10 // the default SETTINGS_MAX_FRAME_SIZE
	first := block[:min(frag, len(block))]
	if err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first,
		EndHeaders: len(block) <= frag, EndStream: endStream}); err != nil {
		return err
	}
	for rest := block[len(first):]; len(rest) > 0; {
		n := min(frag, len(rest))
		if err := h.fr.WriteContinuation(id, n == len(rest), rest[:n]); err != nil {
			return err
		}
		rest = rest[n:]
	}
	return nil
}

// emptyMessage sends an empty gRPC message (a request with no fields) and
// ends the stream.
func (h *h2conn) emptyMessage(id uint32) error {
	h.wmu.Lock()
	defer h.wmu.Unlock()
	return h.fr.WriteData(id, true, []byte{0, 0, 0, 0, 0})
}

func (h *h2conn) reset(id uint32) error {
	h.wmu.Lock()
	defer h.wmu.Unlock()
	return h.fr.WriteRSTStream(id, http2.ErrCodeCancel)
}

// grpcStatus is the grpc-status of a trailers frame, or "".
func grpcStatus(f *http2.MetaHeadersFrame) string {
	for _, hf := range f.Fields {
		if hf.Name == "grpc-status" {
			return hf.Value
		}
	}
	return ""
}

// waitGoroutines waits for the number of goroutines to fall to at most n.
func waitGoroutines(t *testing.T, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines, want at most %d", runtime.NumGoroutine(), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestKeylessStreamFlood opens 1,000 health Watch streams, which need no
// key and stay open, on one connection. The server refuses streams past
// MaxConcurrentStreams and answers RESOURCE_EXHAUSTED past
// MaxKeylessStreams: at most that many stay open, not a goroutine each.
func TestKeylessStreamFlood(t *testing.T) {
	// Not parallel: the test counts the process's goroutines.
	const streams, keyless = 1000, 50
	s := newStackWith(t, grpcapi.Options{Keys: testKeys(t), Conn: grpcapi.ConnLimits{MaxKeylessStreams: keyless}}, insecure.NewCredentials())
	probe := startHealthProbe(t, s.addr)
	before := runtime.NumGoroutine()
	h := dialH2(t, s.addr)
	// Encoded first and written in large chunks, like TestRapidResetFlood's.
	var flood bytes.Buffer
	enc := &h2conn{fr: http2.NewFramer(&flood, nil)}
	enc.enc = hpack.NewEncoder(&enc.hbuf)
	for i := range uint32(streams) {
		id := 2*i + 1
		_ = enc.headers(id, "/grpc.health.v1.Health/Watch", false)
		_ = enc.emptyMessage(id)
	}
	go func() {
		for b := flood.Bytes(); len(b) > 0; {
			n, err := h.conn.Write(b[:min(64<<10, len(b))])
			if err != nil {
				return
			}
			b = b[n:]
		}
	}()
	// Each stream ends up refused (RST_STREAM), ended with a status, or
	// open with the health status sent on it.
	refused, ended, open := map[uint32]bool{}, map[uint32]string{}, map[uint32]bool{}
	deadline := time.After(20 * time.Second)
	for len(refused)+len(ended)+len(open) < streams {
		select {
		case f := <-h.frames:
			switch {
			case f.kind == "rst":
				refused[f.stream] = true
				delete(open, f.stream)
			case f.kind == "headers" && f.status != "":
				ended[f.stream] = f.status
				delete(open, f.stream)
			case f.kind == "data":
				open[f.stream] = true
			}
		case <-h.ended:
			t.Fatalf("the server closed the connection; %d refused, %d ended, %d open", len(refused), len(ended), len(open))
		case <-deadline:
			t.Fatalf("after 20s, %d refused, %d ended, %d open of %d streams", len(refused), len(ended), len(open), streams)
		}
	}
	if len(open) > keyless {
		t.Errorf("%d health Watch streams open, want at most %d", len(open), keyless)
	}
	for id, st := range ended {
		if st != "8" { // RESOURCE_EXHAUSTED
			t.Errorf("stream %d ended with grpc-status %s, want 8 (RESOURCE_EXHAUSTED)", id, st)
			break
		}
	}
	if n := runtime.NumGoroutine(); n > before+2*keyless+50 {
		t.Errorf("%d goroutines with the flood's streams open (%d before), want at most %d more", n, before, 2*keyless+50)
	}
	t.Logf("%d streams: %d refused, %d ended with a status, %d open", streams, len(refused), len(ended), len(open))
	probe.stop(t)
}

// TestOversizedHeadersCloseTheConnection sends a request whose headers
// are 8 MiB, before any key could be checked. The server must stop reading
// and close the connection, not read the whole block and answer it.
func TestOversizedHeadersCloseTheConnection(t *testing.T) {
	// Not parallel: it measures health checks (see healthBound).
	s := newStackWith(t, grpcapi.Options{Keys: testKeys(t)}, insecure.NewCredentials())
	probe := startHealthProbe(t, s.addr)
	h := dialH2(t, s.addr)
	var extra []hpack.HeaderField
	pad := strings.Repeat("x", 1<<10)
	for range 8 << 10 {
		extra = append(extra, hpack.HeaderField{Name: "x-pad", Value: pad, Sensitive: true})
	}
	_ = h.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	writeErr := h.headers(1, settlev1.OrderService_GetOrder_FullMethodName, true, extra...)
	if writeErr == nil {
		t.Errorf("the server took all 8 MiB of headers")
	}
	select {
	case <-h.ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the connection is still open 10s after 8 MiB of headers")
	}
	for len(h.frames) > 0 {
		if f := <-h.frames; f.kind == "headers" && f.stream == 1 {
			t.Errorf("the server answered the oversized request (grpc-status %q) instead of closing the connection", f.status)
		}
	}
	probe.stop(t)
}

// TestRapidResetFlood opens and at once cancels 5,000 calls without a
// key on one connection (HEADERS, the request, RST_STREAM). The server stays healthy,
// handles at most MaxConcurrentStreams of them at once, and logs a few
// lines, not a line per stream.
func TestRapidResetFlood(t *testing.T) {
	// Not parallel: the test counts the process's goroutines.
	const streams = 5000
	s := newStackWith(t, grpcapi.Options{Keys: testKeys(t)}, insecure.NewCredentials())
	probe := startHealthProbe(t, s.addr)
	before := runtime.NumGoroutine()
	h := dialH2(t, s.addr)
	var peak atomic.Int64
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-h.ended:
				return
			case <-time.After(5 * time.Millisecond):
				peak.Store(max(peak.Load(), int64(runtime.NumGoroutine())))
			}
		}
	}()
	// The frames are encoded first and written in large chunks, so that the
	// attacker, which shares this process's CPU with the server, spends
	// little of it.
	var flood bytes.Buffer
	enc := &h2conn{fr: http2.NewFramer(&flood, nil)}
	enc.enc = hpack.NewEncoder(&enc.hbuf)
	for i := range uint32(streams) {
		id := 2*i + 1
		_ = enc.headers(id, settlev1.OrderService_GetOrder_FullMethodName, false)
		_ = enc.emptyMessage(id) // with its request sent, the call reaches the interceptors
		_ = enc.reset(id)
	}
	// The server reads frames in order: its answer to this ping says it has
	// read the whole flood.
	_ = enc.fr.WritePing(false, [8]byte{1})
	_ = h.conn.SetWriteDeadline(time.Now().Add(30 * time.Second))
	for b := flood.Bytes(); len(b) > 0; {
		n, err := h.conn.Write(b[:min(64<<10, len(b))])
		if err != nil {
			t.Fatalf("the flood was cut off after %d of %d bytes: %v", flood.Len()-len(b), flood.Len(), err)
		}
		b = b[n:]
	}
	for read := false; !read; {
		select {
		case f := <-h.frames:
			read = f.kind == "pingack"
		case <-h.ended:
			t.Fatal("the server closed the connection during the flood")
		case <-time.After(20 * time.Second):
			t.Fatal("the server has not read the flood after 20s")
		}
	}
	waitGoroutines(t, before+20, 10*time.Second)
	probe.stop(t)
	h.conn.Close()
	<-sampled
	if p := int(peak.Load()); p > before+2*int(grpcapi.DefaultConnLimits.MaxConcurrentStreams)+50 {
		t.Errorf("%d goroutines at the peak of the flood (%d before)", p, before)
	}
	t.Logf("%d streams reset; the server logged %d lines", streams, strings.Count(s.logs.String(), "\n"))
	if n := strings.Count(s.logs.String(), "\n"); n > 10 {
		t.Errorf("the server logged %d lines for the flood, want a few:\n%.2000s", n, s.logs.String())
	}
}

// TestIdleConnectionsAreClosed fills the listener's connection limit with
// connections that send the HTTP/2 preface and then nothing. The server
// closes them after MaxConnectionIdle, and only then accepts another.
func TestIdleConnectionsAreClosed(t *testing.T) {
	// Not parallel: it measures health checks (see healthBound).
	const limit = 6
	s := newStackWith(t, grpcapi.Options{Conn: grpcapi.ConnLimits{MaxConnections: limit, MaxConnectionIdle: 300 * time.Millisecond}},
		insecure.NewCredentials())
	// The probe's connection holds a slot (the stack's client connection is
	// not used, so never opened).
	probe := startHealthProbe(t, s.addr)
	var idle []*h2conn
	for range limit - 1 {
		h := dialH2(t, s.addr)
		<-h.settings
		idle = append(idle, h)
	}
	extra := dialH2(t, s.addr) // past the limit: not accepted yet
	select {
	case <-extra.settings:
	case <-time.After(15 * time.Second):
		t.Fatal("the connection past the limit is not accepted after 15s, with MaxConnectionIdle 300ms")
	}
	// It was accepted because an idle one was closed (whose reader may
	// take a moment to see it).
	closedOne := make(chan struct{})
	var once sync.Once
	for _, h := range idle {
		go func() {
			select {
			case <-h.ended:
				once.Do(func() { close(closedOne) })
			case <-time.After(15 * time.Second):
			}
		}()
	}
	select {
	case <-closedOne:
	case <-time.After(15 * time.Second):
		t.Fatal("the server accepted a connection past its limit while the others were open")
	}
	for i, h := range idle {
		select {
		case <-h.ended:
		case <-time.After(15 * time.Second):
			t.Fatalf("idle connection %d still open after 15s", i)
		}
		var goAway bool
		for len(h.frames) > 0 {
			if f := <-h.frames; f.kind == "goaway" {
				goAway = true
			}
		}
		if !goAway {
			t.Errorf("idle connection %d was closed without GOAWAY", i)
		}
	}
	probe.stop(t)
}

// TestFailedAuthenticationIsLimitedAndSampled sends 1,000 calls with a
// wrong key from one address: past the burst they are answered
// RESOURCE_EXHAUSTED, a good key from the same address still works, every
// failure is counted, and the log has a line per interval, not per call.
func TestFailedAuthenticationIsLimitedAndSampled(t *testing.T) {
	// Not parallel: it measures health checks (see healthBound).
	const calls, burst = 1000, 5
	metrics := telemetry.NewMetrics()
	s := newStackWith(t, grpcapi.Options{Keys: testKeys(t), Metrics: metrics,
		AuthFailures: grpcapi.AuthFailureLimits{RatePerSecond: 1, Burst: burst, LogInterval: 200 * time.Millisecond}},
		insecure.NewCredentials())
	probe := startHealthProbe(t, s.addr)
	start := time.Now()
	codesSeen := map[codes.Code]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for range calls / 8 {
				_, err := s.orders.GetOrder(with("sk_wrong_key_"+string(rune('a'+w))), &settlev1.GetOrderRequest{Key: &settlev1.GetOrderRequest_Id{Id: "x"}})
				mu.Lock()
				codesSeen[status.Code(err)]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	probe.stop(t)
	elapsed := time.Since(start)
	if n := codesSeen[codes.Unauthenticated]; n < burst || n > burst+int(elapsed.Seconds())+1 {
		t.Errorf("%d calls answered UNAUTHENTICATED in %s, want the burst (%d) and about one a second: %v", n, elapsed, burst, codesSeen)
	}
	if codesSeen[codes.Unauthenticated]+codesSeen[codes.ResourceExhausted] != calls {
		t.Errorf("answers %v, want only UNAUTHENTICATED and RESOURCE_EXHAUSTED", codesSeen)
	}
	// A valid key is never refused for others' failures from its address.
	if _, err := s.orders.GetOrder(with(keyA), &settlev1.GetOrderRequest{Key: &settlev1.GetOrderRequest_MerchantReference{MerchantReference: "none"}}); status.Code(err) != codes.NotFound {
		t.Errorf("a valid key from the flooding address: %v, want NotFound", err)
	}
	// Nor is a key of the wrong role: it is counted, but it is no guess.
	if _, err := s.ops.Stats(with(keyA), &settlev1.StatsRequest{}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("a checkout key on OpsService from the flooding address: %v, want PermissionDenied", err)
	}
	s.srv.Stop() // writes the counts not yet logged
	// A line an interval while the server ran (the calls after the flood
	// included), and the one Stop writes.
	ran := time.Since(start)
	logs := s.logs.String()
	lines := strings.Count(logs, "failed authentication")
	if maxLines := 2 + int(ran/(200*time.Millisecond)); lines < 1 || lines > maxLines {
		t.Errorf("%d log lines for %d failures in %s, want 1 to %d", lines, calls, ran, maxLines)
	}
	if strings.Contains(logs, "sk_wrong_key") {
		t.Errorf("the log holds the presented key")
	}
	if got := logged(logs, "failures="); got != calls+1 {
		t.Errorf("the log lines count %d failures, want %d", got, calls+1)
	}
	counted := counters(t, metrics, "settle_auth_failures_total", "result")
	if int(counted["rejected"]) != codesSeen[codes.Unauthenticated]+1 || int(counted["limited"]) != codesSeen[codes.ResourceExhausted] {
		t.Errorf("settle_auth_failures_total %v, want rejected %d and limited %d", counted, codesSeen[codes.Unauthenticated]+1, codesSeen[codes.ResourceExhausted])
	}
}

// logged sums the numbers after field= in text logs.
func logged(logs, field string) int {
	total := 0
	for rest := logs; ; {
		i := strings.Index(rest, field)
		if i < 0 {
			return total
		}
		rest = rest[i+len(field):]
		n := 0
		for len(rest) > 0 && rest[0] >= '0' && rest[0] <= '9' {
			n = 10*n + int(rest[0]-'0')
			rest = rest[1:]
		}
		total += n
	}
}

// counters reads the counter metric of metrics by the value of its label.
func counters(t *testing.T, metrics *telemetry.Metrics, metric, label string) map[string]float64 {
	t.Helper()
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != metric {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label {
					got[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	return got
}

// TestWatchStreamsHaveTheirOwnLimit opens more WatchOrder streams than the
// key's call limit: they take watch slots, not call slots, so the key's
// other calls go on; past the watch limit a watch is RESOURCE_EXHAUSTED.
func TestWatchStreamsHaveTheirOwnLimit(t *testing.T) {
	// Not parallel: it measures health checks (see healthBound).
	const inFlight, watches = 2, 4
	s := newStackWith(t, grpcapi.Options{Keys: testKeys(t), Limits: grpcapi.Limits{InFlight: inFlight, Watches: watches}},
		insecure.NewCredentials())
	o := s.createWith(t, keyA, "watch-limit-1", "tok_ok")
	probe := startHealthProbe(t, s.addr)
	ctx, cancel := context.WithCancel(with(keyA))
	defer cancel()
	var refused int
	for range 5 * watches {
		stream, err := s.orders.WatchOrder(ctx, &settlev1.WatchOrderRequest{OrderId: o.GetId()})
		if err == nil {
			_, err = stream.Recv()
		}
		switch status.Code(err) {
		case codes.OK:
		case codes.ResourceExhausted:
			refused++
		default:
			t.Fatalf("WatchOrder: %v", err)
		}
	}
	if refused != 4*watches {
		t.Errorf("%d of %d watches refused with a limit of %d, want %d", refused, 5*watches, watches, 4*watches)
	}
	// The key's calls are not starved by its watches.
	for range 2 * inFlight {
		if _, err := s.orders.GetOrder(with(keyA), &settlev1.GetOrderRequest{Key: &settlev1.GetOrderRequest_Id{Id: o.GetId()}}); err != nil {
			t.Fatalf("GetOrder with %d watches open: %v", watches, err)
		}
	}
	// Another key has its own watch slots.
	ob := s.createWith(t, keyB, "watch-limit-b", "tok_ok")
	stream, err := s.orders.WatchOrder(with(keyB), &settlev1.WatchOrderRequest{OrderId: ob.GetId()})
	if err == nil {
		_, err = stream.Recv()
	}
	if err != nil {
		t.Errorf("merchant B's watch while A's slots are full: %v", err)
	}
	probe.stop(t)
}

// TestWatchStreamLifetime: a WatchOrder stream on an order that stays
// PENDING ends with status OK after the server's watch lifetime.
func TestWatchStreamLifetime(t *testing.T) {
	t.Parallel()
	s := newStackWith(t, grpcapi.Options{WatchLifetime: 300 * time.Millisecond}, insecure.NewCredentials())
	o := s.create(t, "watch-lifetime-1", "tok_ok")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stream, err := s.orders.WatchOrder(ctx, &settlev1.WatchOrderRequest{OrderId: o.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := stream.Recv(); err != nil || resp.GetOrder().GetState() != pending {
		t.Fatalf("first message: %v, %v; want PENDING", resp, err)
	}
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("a watch past its lifetime: %v, want the stream to end with status OK", err)
	}
}

// TestConnectionAgeEndsBusyConnections: a connection with a call open
// (here a health Watch, which never ends by itself) is sent GOAWAY after
// MaxConnectionAge and closed after the grace, so no client holds one
// connection, and its slot, for ever.
func TestConnectionAgeEndsBusyConnections(t *testing.T) {
	t.Parallel()
	s := newStackWith(t, grpcapi.Options{Conn: grpcapi.ConnLimits{MaxConnectionAge: 300 * time.Millisecond,
		MaxConnectionAgeGrace: 300 * time.Millisecond}}, insecure.NewCredentials())
	h := dialH2(t, s.addr)
	if err := h.headers(1, "/grpc.health.v1.Health/Watch", false); err != nil {
		t.Fatal(err)
	}
	if err := h.emptyMessage(1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.ended:
	case <-time.After(15 * time.Second):
		t.Fatal("a connection with a call open is still open 15s after its MaxConnectionAge (300ms)")
	}
	var goAway bool
	for len(h.frames) > 0 {
		if f := <-h.frames; f.kind == "goaway" {
			goAway = true
		}
	}
	if !goAway {
		t.Error("the connection was closed without GOAWAY")
	}
}

// TestPingFloodIsRefused: a client pinging more often than
// KeepaliveMinTime is sent GOAWAY (too_many_pings) and disconnected.
func TestPingFloodIsRefused(t *testing.T) {
	// Not parallel: it measures health checks (see healthBound).
	s := newStackWith(t, grpcapi.Options{}, insecure.NewCredentials())
	probe := startHealthProbe(t, s.addr)
	h := dialH2(t, s.addr)
	<-h.settings
	for i := range 1000 {
		h.wmu.Lock()
		err := h.fr.WritePing(false, [8]byte{byte(i), byte(i >> 8)})
		h.wmu.Unlock()
		if err != nil {
			break // closed by the server
		}
	}
	select {
	case <-h.ended:
	case <-time.After(10 * time.Second):
		t.Fatal("a client that pinged 1,000 times at once is still connected after 10s")
	}
	var goAway bool
	for len(h.frames) > 0 {
		if f := <-h.frames; f.kind == "goaway" {
			goAway = true
		}
	}
	if !goAway {
		t.Error("the connection was closed without GOAWAY")
	}
	probe.stop(t)
}
