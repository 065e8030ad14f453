package chaos

import (
	"context"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/settlepay/settle/internal/gateway/sim"
)

// Routes (issue #30): a share of the checkouts (Config.RouteShare) are
// made with routes over more refpsp gateway accounts and "refpsp", each
// account a simulator of its own in the harness's process, with its own
// ledger and events, wired into every process with SETTLE_REFPSP_ACCOUNTS:
//
//   - down: its listener is closed for stretches of the run, so that a
//     charge meets a refused connection (proven not sent) and cascades;
//   - slow: a share of its charges are made and answered after the
//     gateway timeout (some hidden from lookups meanwhile), an unknown
//     outcome that must keep the order CHARGING there;
//   - flaky: a share of its checkouts are declined processing_error (a
//     technical decline, after which a charge cascades), and some of its
//     charges answered 503 without charging.
//
// A charge belongs to the ledger of its attempt's gateway: the invariants
// read every account's ledger, and the routing invariants
// (InvRouteOneCharge and after) what the orders' histories say of them.

// The accounts' names.
const (
	accountDown  = "down"
	accountSlow  = "slow"
	accountFlaky = "flaky"
	// refpspGateway is the default gateway, the simulator of the
	// single-gateway orders, and the last route of every order with
	// routes.
	refpspGateway = "refpsp"
)

// DefaultRouteShare is the share of checkouts made with routes of
// `settle chaos` and of TestChaos.
const DefaultRouteShare = 0.3

// Stretches of the account "down": up for downUp to twice that, then
// down for downFor to twice that, until the checkouts stop.
const (
	downUp  = 2 * time.Second
	downFor = time.Second
)

// accountSpecs are the accounts a run with routes starts, in their order,
// with their simulators' random faults (on tok_ok and tok_random).
var accountSpecs = []struct {
	name   string
	faults sim.RandomFaults
}{
	{accountDown, sim.RandomFaults{}},
	{accountSlow, sim.RandomFaults{Timeout: 0.35, LookupNotFoundWhileInFlight: 0.5}},
	{accountFlaky, sim.RandomFaults{FiveXXNoCharge: 0.1}},
}

// account is one more refpsp gateway account: a simulator served on a
// fixed address, which can be taken down (every connection closed, the
// listener too, so that a dial is refused) and brought up again.
type account struct {
	name string
	gw   *sim.Sim
	addr string

	mu    sync.Mutex
	srv   *http.Server // nil while down
	downs int          // the stretches it was down
}

// startAccounts starts the accounts, their events sent to each replica's
// listener at /webhooks/<name> in turn, as the simulator's are.
func startAccounts(seed uint64, hookAddrs []string) ([]*account, error) {
	var out []*account
	for i, spec := range accountSpecs {
		events := gatewayEvents
		for j, addr := range hookAddrs {
			url := "http://" + addr + "/webhooks/" + spec.name
			if j == 0 {
				events.URL = url
			} else {
				events.More = append(events.More, url)
			}
		}
		// Each account draws its faults from a seed of its own.
		gw := sim.New(sim.Options{Seed: seed + uint64(i+1)<<32, Random: spec.faults, ClientTimeout: simHold, Events: events})
		addr, err := freePort()
		if err != nil {
			stopAccounts(out)
			return nil, err
		}
		a := &account{name: spec.name, gw: gw, addr: addr}
		out = append(out, a)
		if err := a.up(); err != nil {
			stopAccounts(out)
			return nil, err
		}
	}
	return out, nil
}

// accountsEnv is SETTLE_REFPSP_ACCOUNTS naming every account.
func accountsEnv(accounts []*account) string {
	parts := make([]string, len(accounts))
	for i, a := range accounts {
		parts[i] = a.name + "=http://" + a.addr
	}
	return "SETTLE_REFPSP_ACCOUNTS=" + strings.Join(parts, ",")
}

// up serves the account again on its address (nothing when it is up).
func (a *account) up() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.srv != nil {
		return nil
	}
	// The port was the account's a moment ago; another process may take
	// it meanwhile, which a few tries cannot help: the run reports it.
	var lis net.Listener
	var err error
	for range 20 {
		if lis, err = net.Listen("tcp", a.addr); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		return err
	}
	a.srv = &http.Server{Handler: a.gw, ReadHeaderTimeout: 10 * time.Second}
	go func(srv *http.Server) { _ = srv.Serve(lis) }(a.srv)
	return nil
}

// down closes the account's listener and every connection to it: a
// request in flight is cut (an unknown outcome), a new one refused.
func (a *account) down() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.srv == nil {
		return
	}
	_ = a.srv.Close()
	a.srv = nil
	a.downs++
}

// stop stops serving the account and its events, for good.
func (a *account) stop() {
	a.down()
	a.gw.Close()
}

func stopAccounts(accounts []*account) {
	for _, a := range accounts {
		a.stop()
	}
}

// flap takes the account down and up in seeded stretches until stop is
// closed or ctx ends, and leaves it up.
func (h *harness) flap(ctx context.Context, a *account, stop <-chan struct{}) {
	rng := rand.New(rand.NewPCG(h.cfg.Seed, 0xd0e))
	wait := func(base time.Duration) bool {
		select {
		case <-ctx.Done():
			return false
		case <-stop:
			return false
		case <-time.After(base + time.Duration(rng.Int64N(int64(base)))):
			return true
		}
	}
	defer func() {
		if err := a.up(); err != nil {
			h.problem("account %s: listen again on %s: %v", a.name, a.addr, err)
		}
	}()
	for wait(downUp) {
		h.logf("account %s: down", a.name)
		a.down()
		ok := wait(downFor)
		if err := a.up(); err != nil {
			h.problem("account %s: listen again on %s: %v", a.name, a.addr, err)
			return
		}
		h.logf("account %s: up", a.name)
		if !ok {
			return
		}
	}
}

// accountLedger is an account's ledgers at the end of a run.
type accountLedger struct {
	name     string
	charges  []sim.Charge
	refunds  []sim.Refund
	captures []sim.Capture
	voids    []sim.Void
}

// ledgerOf reads a simulator's ledgers.
func ledgerOf(name string, gw *sim.Sim) accountLedger {
	return accountLedger{name: name, charges: gw.Ledger(), refunds: gw.Refunds(), captures: gw.Captures(), voids: gw.Voids()}
}

// mergeLedgers puts the accounts' ledgers into one of each kind, for the
// invariants that hold over every gateway, and returns the account of
// each charge, by its id there. Every simulator numbers its charges,
// refunds, captures and voids from 1: the ids of every account but the
// first ("refpsp") are prefixed with the account's name, so that no two
// are the same; their references are Settle's, unique already.
func mergeLedgers(ls []accountLedger) (charges []sim.Charge, refunds []sim.Refund, captures []sim.Capture, voids []sim.Void,
	accountOf map[string]string) {
	accountOf = map[string]string{}
	for i, l := range ls {
		prefix := ""
		if i > 0 {
			prefix = l.name + "/"
		}
		for _, c := range l.charges {
			c.ID = prefix + c.ID
			accountOf[c.ID] = l.name
			charges = append(charges, c)
		}
		for _, r := range l.refunds {
			r.ID = prefix + r.ID
			refunds = append(refunds, r)
		}
		for _, c := range l.captures {
			c.ID = prefix + c.ID
			captures = append(captures, c)
		}
		for _, v := range l.voids {
			v.ID = prefix + v.ID
			voids = append(voids, v)
		}
	}
	return charges, refunds, captures, voids, accountOf
}
