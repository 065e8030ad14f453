package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
)

// Timeouts of the checkout clients' calls. A charge's answer takes up to
// the gateway timeout, and a frozen replica does not answer at all.
const (
	createTimeout = 3 * time.Second
	chargeTimeout = 3 * time.Second
	// callTries is how many times a client sends one request (one
	// request_id) before it gives up on it.
	callTries = 5
	// maxClicks bounds the charge requests (request_ids) of one checkout.
	maxClicks = 4
	// tok3DS is the simulator's card that asks for 3-D Secure, and
	// returnURL where its challenge page would send the customer back.
	tok3DS    = "tok_3ds"
	returnURL = "https://shop.example/return"
	// pageTimeout bounds a customer's visit to the challenge page.
	pageTimeout = 2 * time.Second
	// defaultManualShare is the share of checkouts that authorize now and
	// capture later (capture MANUAL; see holds), and lapseShare the share of those
	// paid with the simulator's card whose authorization lapses after
	// lapseAfter, so that holds expire within a run.
	defaultManualShare = 0.15
	// defaultActionShare is the share of the simulator's checkouts that
	// meet a 3-D Secure challenge.
	defaultActionShare = 0.1
	lapseShare         = 0.2
	lapseAfter         = 3 * time.Second
)

var currencies = []string{"GBP", "EUR", "USD"}

// history is what the clients were told, for the invariants that compare
// answers with the database.
type history struct {
	mu sync.Mutex
	// orders maps every order a CreateOrder answered to its merchant
	// reference.
	orders map[string]string
	// requests maps each request_id to what its ChargeOrder calls answered.
	requests map[string]*request
	// paid and canceled are the orders an answer said were PAID or CANCELED.
	paid, canceled map[string]bool
	charges        int
	errors         map[codes.Code]int
	// doubles counts the charges sent to two replicas at once; reclicks the
	// new request_ids for an order after its first.
	doubles, reclicks int
	// refundReqs maps each refund request_id to what its RefundOrder calls
	// answered; refunded holds the refunds an answer said SUCCEEDED.
	refundReqs map[string]*refundRequest
	refunded   map[string]bool
	// refundCalls counts RefundOrder calls; overRefunds the answers
	// FAILED_PRECONDITION (nothing, or too little, left to refund).
	refundCalls, overRefunds int
	// actions counts the answers REQUIRES_ACTION; then what the customers
	// did at the challenge page: completed, failed, abandoned, or came
	// back to it around the expiry (late).
	actions, completed, failedAuth, abandoned, late int
	// captureReqs and voidReqs map each capture (void) request_id to the
	// captures (voids) its answers named; captured (voided) holds those an
	// answer said SUCCEEDED.
	captureReqs, voidReqs map[string]*holdRequest
	captured, voided      map[string]bool
	// authorized counts the answers AUTHORIZED; captureCalls and voidCalls
	// the CaptureOrder and VoidOrder calls, overCaptures and refusedVoids
	// their answers FAILED_PRECONDITION (more than is left, a void beside
	// a capture, a hold no longer open).
	authorized, captureCalls, voidCalls, overCaptures, refusedVoids int
}

// holdRequest is what the CaptureOrder (VoidOrder) calls with one
// request_id answered.
type holdRequest struct {
	order string
	named map[string]int // capture (void) id → answers that named it
}

// refundRequest is what the RefundOrder calls with one request_id answered.
type refundRequest struct {
	order   string
	refunds map[string]int // refund id → answers that named it
}

// request is what the ChargeOrder calls with one request_id answered.
type request struct {
	order    string
	attempts map[string]int // attempt id → answers that named it
	answers  int
	calls    int
}

func newHistory() *history {
	return &history{orders: map[string]string{}, requests: map[string]*request{},
		paid: map[string]bool{}, canceled: map[string]bool{}, errors: map[codes.Code]int{},
		refundReqs: map[string]*refundRequest{}, refunded: map[string]bool{},
		captureReqs: map[string]*holdRequest{}, voidReqs: map[string]*holdRequest{},
		captured: map[string]bool{}, voided: map[string]bool{}}
}

// holdAnswered records the answer to a CaptureOrder (capture) or VoidOrder
// call: the id it named, and whether it said SUCCEEDED.
func (h *history) holdAnswered(capture bool, orderID, requestID, id string, succeeded bool, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	reqs, done, calls, refused := h.voidReqs, h.voided, &h.voidCalls, &h.refusedVoids
	if capture {
		reqs, done, calls, refused = h.captureReqs, h.captured, &h.captureCalls, &h.overCaptures
	}
	*calls++
	r := reqs[requestID]
	if r == nil {
		r = &holdRequest{order: orderID, named: map[string]int{}}
		reqs[requestID] = r
	}
	switch {
	case status.Code(err) == codes.FailedPrecondition:
		*refused++
		return
	case err != nil:
		h.errors[status.Code(err)]++
		return
	}
	r.named[id]++
	if succeeded {
		done[id] = true
	}
}

func (h *history) refundAnswered(orderID, requestID string, resp *settlev1.RefundOrderResponse, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.refundCalls++
	r := h.refundReqs[requestID]
	if r == nil {
		r = &refundRequest{order: orderID, refunds: map[string]int{}}
		h.refundReqs[requestID] = r
	}
	switch {
	case status.Code(err) == codes.FailedPrecondition:
		h.overRefunds++
		return
	case err != nil:
		h.errors[status.Code(err)]++
		return
	}
	r.refunds[resp.GetRefund().GetId()]++
	if resp.GetRefund().GetState() == settlev1.RefundState_REFUND_STATE_SUCCEEDED {
		h.refunded[resp.GetRefund().GetId()] = true
	}
}

func (h *history) created(o *settlev1.Order) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.orders[o.GetId()] = o.GetMerchantReference()
}

func (h *history) charged(orderID, requestID string, resp *settlev1.ChargeOrderResponse, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.charges++
	r := h.requests[requestID]
	if r == nil {
		r = &request{order: orderID, attempts: map[string]int{}}
		h.requests[requestID] = r
	}
	r.calls++
	if err != nil {
		h.errors[status.Code(err)]++
		return
	}
	r.answers++
	switch resp.GetOrder().GetState() {
	case settlev1.OrderState_ORDER_STATE_REQUIRES_ACTION:
		h.actions++
	case settlev1.OrderState_ORDER_STATE_AUTHORIZED:
		h.authorized++
	default:
	}
	if id := resp.GetAttempt().GetId(); id != "" {
		r.attempts[id]++
	}
	if resp.GetOrder().GetState() == settlev1.OrderState_ORDER_STATE_PAID {
		h.paid[orderID] = true
	}
}

// acted records what a customer did at a challenge page.
func (h *history) acted(what *int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	*what++
}

func (h *history) canceledOrder(orderID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.canceled[orderID] = true
}

func (h *history) clicked(again, double bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if again {
		h.reclicks++
	}
	if double {
		h.doubles++
	}
}

// stats describes what the clients did, for the log.
func (h *history) stats() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	resent := 0
	for _, r := range h.requests {
		if r.calls > 1 {
			resent++
		}
	}
	return fmt.Sprintf("%d orders, %d ChargeOrder calls for %d request_ids (%d sent more than once, %d to two replicas at once, %d clicks again), %d answers PAID, %d CANCELED, %d REQUIRES_ACTION (3-D Secure: %d completed, %d failed, %d abandoned, %d opened around the expiry); %d RefundOrder calls for %d request_ids, %d answers SUCCEEDED, %d refused as more than is left; %d answers AUTHORIZED, %d CaptureOrder calls for %d request_ids (%d captures answered SUCCEEDED, %d calls refused), %d VoidOrder calls for %d request_ids (%d voids answered SUCCEEDED, %d calls refused); errors %v",
		len(h.orders), h.charges, len(h.requests), resent, h.doubles, h.reclicks, len(h.paid), len(h.canceled),
		h.actions, h.completed, h.failedAuth, h.abandoned, h.late,
		h.refundCalls, len(h.refundReqs), len(h.refunded), h.overRefunds,
		h.authorized, h.captureCalls, len(h.captureReqs), len(h.captured), h.overCaptures,
		h.voidCalls, len(h.voidReqs), len(h.voided), h.refusedVoids, h.errors)
}

func (h *history) failed(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.errors[status.Code(err)]++
}

// workload is the checkout clients.
type workload struct {
	seed     uint64
	clients  []settlev1.OrderServiceClient // one per replica
	ops      []settlev1.OpsServiceClient   // one per replica
	hist     *history
	interval time.Duration // between the checkouts of one client
	// web is the customers' browser, for the simulator's challenge pages.
	web *http.Client
	// actionExpiry is how long Settle gives a customer to act.
	actionExpiry time.Duration
	// manualShare is the share of the checkouts that authorize and
	// capture later, adyenShare the share on the gateway "adyen".
	manualShare, adyenShare float64
	// actionShare is the share of the simulator's checkouts paid with its
	// 3-D Secure card.
	actionShare float64
	// routeShare is the share of the checkouts made with routes over
	// routeGateways (the harness's more refpsp accounts) and "refpsp".
	routeShare    float64
	routeGateways []string
	// routeVersions counts the changes of route rules that landed.
	routeVersions atomic.Int64
}

// client runs checkouts, one after another, at the workload's pace (or as
// fast as it can when behind), until ctx ends or stop is closed. Its
// decisions are drawn from its own generator; the answers it gets, and so
// its course, depend on the run.
func (w *workload) client(ctx context.Context, id int, stop <-chan struct{}) {
	c := &checkout{w: w, rng: rand.New(rand.NewPCG(w.seed, uint64(id)+1)), client: id, stop: stop}
	next := time.Now()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-stop:
			return
		case <-time.After(time.Until(next)):
		}
		c.run(ctx, n)
		next = next.Add(w.interval)
	}
}

// checkout is one client's course through one order.
type checkout struct {
	w      *workload
	rng    *rand.Rand
	client int
	stop   <-chan struct{}
	// present says the customer is at the checkout (a 3-D Secure card's
	// charges are sent with customer_present and a return_url).
	present bool
	// adyen says the order is on the fake Adyen, whose 3-D Secure page
	// takes ?result=authorised or ?result=refused.
	adyen bool
	// routes are the order's, when it was made with routes: its charges
	// then name no payment method.
	routes []*settlev1.Route
}

func (c *checkout) stopped() bool {
	select {
	case <-c.stop:
		return true
	default:
		return false
	}
}

func (c *checkout) replica() settlev1.OrderServiceClient {
	return c.w.clients[c.rng.IntN(len(c.w.clients))]
}

// run is one checkout: create an order, then click "pay" until it is paid
// or the customer gives up, with the retries and double clicks real
// checkouts make.
func (c *checkout) run(ctx context.Context, n int) {
	// A share of the checkouts on Adyen (drawn only when there is one, so
	// that runs without Adyen keep their course).
	c.adyen = c.w.adyenShare > 0 && c.rng.Float64() < c.w.adyenShare
	if c.adyen {
		c.runAdyen(ctx, n)
		return
	}
	// A share with routes (drawn only when there are routes, so that runs
	// without them keep their course).
	c.routes = nil
	if c.w.routeShare > 0 && len(c.w.routeGateways) > 0 && c.rng.Float64() < c.w.routeShare {
		c.runRoutes(ctx, n)
		return
	}
	token := "tok_ok" // with random faults at the simulator
	switch x := c.rng.Float64(); {
	case x < 0.1:
		token = "tok_decline"
	case x < 0.1+c.w.actionShare:
		token = tok3DS
	}
	capture := settlev1.CaptureMode_CAPTURE_MODE_AUTOMATIC
	if c.rng.Float64() < c.w.manualShare {
		// Authorize now, capture later: with random faults on the
		// authorization, its captures and its voids alike, or a hold
		// that lapses within the run.
		capture, token = settlev1.CaptureMode_CAPTURE_MODE_MANUAL, "tok_ok"
		if c.rng.Float64() < lapseShare {
			token = fmt.Sprintf("tok_lapse_%d", lapseAfter.Milliseconds())
		}
	}
	c.pay(ctx, n, "", token, capture)
}

// runAdyen is a checkout on the fake Adyen: its random faults on tok_ok
// and tok_random, answers held past the gateway timeout (tok_timeout),
// 3-D Secure and declines; captures that Adyen reports done and then
// failed (tok_capture_fail), refunds the same (tok_refund_fail), and holds
// that lapse within the run, told by EXPIRE (tok_lapse_<ms>); automatic
// and manual capture alike.
func (c *checkout) runAdyen(ctx context.Context, n int) {
	token := "tok_ok"
	switch x := c.rng.Float64(); {
	case x < 0.1:
		token = "tok_decline"
	case x < 0.22:
		token = tok3DS
	case x < 0.3:
		token = "tok_timeout"
	case x < 0.5:
		token = "tok_random"
	case x < 0.57:
		token = "tok_capture_fail"
	case x < 0.64:
		token = "tok_refund_fail"
	case x < 0.7:
		token = fmt.Sprintf("tok_lapse_%d", lapseAfter.Milliseconds())
	}
	capture := settlev1.CaptureMode_CAPTURE_MODE_AUTOMATIC
	if c.rng.Float64() < c.w.manualShare || strings.HasPrefix(token, "tok_lapse_") {
		capture = settlev1.CaptureMode_CAPTURE_MODE_MANUAL
	}
	c.pay(ctx, n, "adyen", token, capture)
}

// runRoutes is a checkout with routes: one or two of the accounts, in a
// random order, then "refpsp". A charge on "down" while it is down is
// refused (not sent) and cascades; on "slow" it may time out after
// charging, and the order must wait there for the reconciler; on "flaky"
// half the checkouts are declined processing_error, a technical decline
// after which the charge cascades, and some charges answered 503 before
// anything is charged (unknown until the reconciler proves it).
func (c *checkout) runRoutes(ctx context.Context, n int) {
	names := slices.Clone(c.w.routeGateways)
	c.rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	names = names[:1+c.rng.IntN(min(2, len(names)))]
	var routes []*settlev1.Route
	for _, g := range names {
		token := "tok_random" // under the account's random faults
		if g == accountFlaky && c.rng.Float64() < 0.5 {
			token = "tok_decline_processing_error"
		}
		routes = append(routes, &settlev1.Route{Gateway: g, PaymentMethod: token})
	}
	c.routes = append(routes, &settlev1.Route{Gateway: refpspGateway, PaymentMethod: "tok_ok"})
	c.pay(ctx, n, "", "", settlev1.CaptureMode_CAPTURE_MODE_AUTOMATIC)
}

// routeChanges is how many times changeRoutes changes the merchant's
// routing rules in a run, at even intervals.
const routeChanges = 3

// changeRoutes changes the merchant's route rules while the checkouts
// run (issue #30: "routes changed while it runs"), at routeChanges even
// instants of the run d, until stop is closed: each change moves the
// orders created after it, never one already created, and the
// invariants hold across them.
func (w *workload) changeRoutes(ctx context.Context, d time.Duration, stop <-chan struct{}) {
	if w.routeShare == 0 {
		return
	}
	start := time.Now()
	for i := range routeChanges {
		at := start.Add(d * time.Duration(i+1) / (routeChanges + 1))
		select {
		case <-ctx.Done():
			return
		case <-stop:
			return
		case <-time.After(time.Until(at)):
		}
		w.setRoutes(ctx, i)
	}
}

// setRoutes makes change i of the run's route rules, through one replica
// after another until one takes it (replicas are killed and frozen): a
// weighted split over the accounts, then "refpsp" first for large
// amounts, then no rules (each checkout's order). A change lost to a
// fault is not made again: the run goes on with the rules it has.
func (w *workload) setRoutes(ctx context.Context, i int) {
	var rules []*settlev1.RouteRule
	switch i % routeChanges {
	case 0:
		split := []*settlev1.WeightedGateway{{Gateway: refpspGateway, Weight: 1}}
		for k, g := range w.routeGateways {
			split = append(split, &settlev1.WeightedGateway{Gateway: g, Weight: int32(k + 2)})
		}
		rules = []*settlev1.RouteRule{{Name: "split", Split: split}}
	case 1:
		rules = []*settlev1.RouteRule{{Name: "large-to-refpsp", MinAmountMinor: 25_000, Gateways: []string{refpspGateway}}}
	}
	for k := range 2 * len(w.ops) {
		ops := w.ops[(i+k)%len(w.ops)]
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		cur, err := ops.GetRoutes(cctx, &settlev1.GetRoutesRequest{MerchantId: merchant})
		if err == nil {
			_, err = ops.SetRoutes(cctx, &settlev1.SetRoutesRequest{MerchantId: merchant,
				ExpectedVersion: cur.GetRoutes().GetVersion(), Rules: rules, Note: fmt.Sprintf("chaos change %d", i+1)})
		}
		cancel()
		if err == nil {
			w.routeVersions.Add(1)
			return
		}
	}
}

// pay creates an order on gateway (the default when "") and clicks "pay"
// until it is paid or the customer gives up.
func (c *checkout) pay(ctx context.Context, n int, gateway, token string, capture settlev1.CaptureMode) {
	c.present = token == tok3DS
	o := c.create(ctx, &settlev1.CreateOrderRequest{
		MerchantReference: fmt.Sprintf("chaos-%d-%d", c.client, n),
		Amount:            &settlev1.Money{Currency: currencies[c.rng.IntN(len(currencies))], AmountMinor: 100 + c.rng.Int64N(50_000)},
		PaymentMethod:     token,
		Gateway:           gateway,
		Capture:           capture,
		Routes:            c.routes,
	})
	if o == nil {
		return
	}
	if c.rng.Float64() < 0.05 {
		c.cancel(ctx, o.GetId()) // abandoned before paying
		return
	}
	state := o.GetState()
	for click := range maxClicks {
		if c.stopped() && click > 0 {
			return
		}
		requestID := fmt.Sprintf("req-%d-%d-%d", c.client, n, click)
		pm := ""
		if state == settlev1.OrderState_ORDER_STATE_PENDING && token != "tok_ok" && c.routes == nil && click > 0 && c.rng.Float64() < 0.7 {
			pm = "tok_ok" // another card after a decline (or a failed or expired challenge)
		}
		var resp *settlev1.ChargeOrderResponse
		double := c.rng.Float64() < 0.15
		c.w.hist.clicked(click > 0, double)
		if double {
			resp = c.doubleClick(ctx, o.GetId(), requestID, pm)
		} else {
			resp = c.charge(ctx, c.replica(), o.GetId(), requestID, pm)
		}
		if resp == nil {
			return // gave up; the order is left as it is
		}
		state = resp.GetOrder().GetState()
		if state == settlev1.OrderState_ORDER_STATE_REQUIRES_ACTION {
			if resp = c.act(ctx, o.GetId(), requestID, pm, resp); resp == nil {
				return // abandoned: the reconciler's expiry cancels the attempt
			}
			state = resp.GetOrder().GetState()
		}
		x := c.rng.Float64()
		switch state {
		case settlev1.OrderState_ORDER_STATE_AUTHORIZED:
			c.holds(ctx, resp.GetOrder(), n, strings.HasPrefix(token, "tok_lapse_"))
			return
		case settlev1.OrderState_ORDER_STATE_PAID:
			if x < 0.9 {
				c.refunds(ctx, o, n, token == "tok_refund_fail")
				return
			}
			// The customer did not see the confirmation and pays again.
		case settlev1.OrderState_ORDER_STATE_PENDING:
			if x < 0.2 {
				c.cancel(ctx, o.GetId())
				return
			}
			if x < 0.3 {
				return
			}
			// Declined, or the gateway proved nothing happened: try again.
		case settlev1.OrderState_ORDER_STATE_CHARGING:
			if x < 0.6 {
				return // wait for the reconciler
			}
			// The spinner spins too long: click again.
		default:
			return
		}
	}
}

// act is the customer at the gateway's 3-D Secure challenge: they
// complete it or fail it and come back to the checkout, which asks again
// with the same request_id; or they abandon it, left to the reconciler's
// expiry, and some open the page anyway around the expiry, racing the
// cancel. It returns the answer after the customer's return, or nil when
// the customer left.
func (c *checkout) act(ctx context.Context, orderID, requestID, pm string, resp *settlev1.ChargeOrderResponse) *settlev1.ChargeOrderResponse {
	page := resp.GetNextAction().GetRedirectUrl()
	complete, fail := page, page+"?fail=1"
	if c.adyen {
		complete, fail = page+"?result=authorised", page+"?result=refused"
	}
	h := c.w.hist
	switch x := c.rng.Float64(); {
	case page == "":
		h.acted(&h.abandoned)
		return nil
	case x < 0.5:
		h.acted(&h.completed)
		c.open(ctx, complete)
	case x < 0.7:
		h.acted(&h.failedAuth)
		c.open(ctx, fail)
	case x < 0.85:
		h.acted(&h.abandoned)
		return nil
	default:
		// Back at the page when the reconciler expires the attempt, give or
		// take: a completion racing the cancel must end PAID or not charge.
		h.acted(&h.late)
		wait := c.w.actionExpiry - 500*time.Millisecond + time.Duration(c.rng.Int64N(int64(2*time.Second)))
		select {
		case <-ctx.Done():
		case <-c.stop:
		case <-time.After(wait):
			c.open(ctx, complete)
		}
		return nil
	}
	return c.charge(ctx, c.replica(), orderID, requestID, pm)
}

// open is the customer's browser opening a page of the simulator's: the
// answer does not matter (a challenge already ended answers 409).
func (c *checkout) open(ctx context.Context, url string) {
	ctx, cancel := context.WithTimeout(ctx, pageTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return
	}
	if resp, err := c.w.web.Do(req); err == nil {
		resp.Body.Close()
	}
}

func (c *checkout) create(ctx context.Context, req *settlev1.CreateOrderRequest) *settlev1.Order {
	for try := range callTries {
		if try > 0 && !c.pause(ctx, try) {
			return nil
		}
		cctx, cancel := context.WithTimeout(ctx, createTimeout)
		resp, err := c.replica().CreateOrder(cctx, req)
		cancel()
		if err == nil {
			c.w.hist.created(resp.GetOrder())
			return resp.GetOrder()
		}
		c.w.hist.failed(err)
		if !retryable(err) {
			return nil
		}
	}
	return nil
}

// charge sends one charge request to a replica, and again with the same
// request_id (to any replica) while it fails, as a client that lost the
// answer does.
func (c *checkout) charge(ctx context.Context, to settlev1.OrderServiceClient, orderID, requestID, pm string) *settlev1.ChargeOrderResponse {
	req := &settlev1.ChargeOrderRequest{OrderId: orderID, RequestId: requestID, PaymentMethod: pm}
	if c.present {
		req.CustomerPresent, req.ReturnUrl = true, returnURL
	}
	for try := range callTries {
		if try > 0 {
			if !c.pause(ctx, try) {
				return nil
			}
			to = c.replica()
		}
		cctx, cancel := context.WithTimeout(ctx, chargeTimeout)
		resp, err := to.ChargeOrder(cctx, req)
		cancel()
		c.w.hist.charged(orderID, requestID, resp, err)
		if err == nil {
			return resp
		}
		if !retryable(err) {
			return nil
		}
	}
	return nil
}

// doubleClick sends charge requests for one order to two replicas at once:
// the same request twice (a retry racing the original), or two clicks.
func (c *checkout) doubleClick(ctx context.Context, orderID, requestID, pm string) *settlev1.ChargeOrderResponse {
	i := c.rng.IntN(len(c.w.clients))
	j := (i + 1 + c.rng.IntN(max(1, len(c.w.clients)-1))) % len(c.w.clients)
	second := requestID
	if c.rng.Float64() < 0.5 {
		second += "-b"
	}
	var (
		wg    sync.WaitGroup
		resps [2]*settlev1.ChargeOrderResponse
	)
	// Each goroutine gets its own generator for its retries' replicas.
	seeds := [2]uint64{c.rng.Uint64(), c.rng.Uint64()}
	for k, r := range []struct {
		to  settlev1.OrderServiceClient
		req string
	}{{c.w.clients[i], requestID}, {c.w.clients[j], second}} {
		wg.Go(func() {
			cc := &checkout{w: c.w, rng: rand.New(rand.NewPCG(seeds[k], 1)), client: c.client, stop: c.stop, present: c.present, adyen: c.adyen}
			resps[k] = cc.charge(ctx, r.to, orderID, r.req, pm)
		})
	}
	wg.Wait()
	for _, r := range resps {
		if r.GetOrder().GetState() == settlev1.OrderState_ORDER_STATE_PAID {
			return r
		}
	}
	if resps[0] != nil {
		return resps[0]
	}
	return resps[1]
}

// refunds gives some or all of a paid order's money back, now and then:
// the whole of it, a part and perhaps the rest, or two refunds that do not
// both fit, sent to two replicas at once (two operators clicking); always
// when always is set.
func (c *checkout) refunds(ctx context.Context, o *settlev1.Order, n int, always bool) {
	if c.rng.Float64() >= 0.35 && !always {
		return
	}
	amount := o.GetAmount().GetAmountMinor()
	rid := func(k int) string { return fmt.Sprintf("refund-%d-%d-%d", c.client, n, k) }
	switch x := c.rng.Float64(); {
	case x < 0.3:
		c.refund(ctx, c.replica(), o.GetId(), rid(0), 0)
	case x < 0.7:
		c.refund(ctx, c.replica(), o.GetId(), rid(0), 1+c.rng.Int64N(amount))
		if c.rng.Float64() < 0.5 {
			c.refund(ctx, c.replica(), o.GetId(), rid(1), 0) // the rest
		}
	default:
		i := c.rng.IntN(len(c.w.clients))
		j := (i + 1) % len(c.w.clients)
		each := amount/2 + 1 + c.rng.Int64N(amount/2+1)
		seeds := [2]uint64{c.rng.Uint64(), c.rng.Uint64()}
		var wg sync.WaitGroup
		for k, to := range []settlev1.OrderServiceClient{c.w.clients[i], c.w.clients[j]} {
			wg.Go(func() {
				cc := &checkout{w: c.w, rng: rand.New(rand.NewPCG(seeds[k], 2)), client: c.client, stop: c.stop}
				cc.refund(ctx, to, o.GetId(), rid(k), each)
			})
		}
		wg.Wait()
	}
}

// refund sends one refund request, and again with the same request_id
// while it fails, as a client that lost the answer does.
func (c *checkout) refund(ctx context.Context, to settlev1.OrderServiceClient, orderID, requestID string, amount int64) {
	req := &settlev1.RefundOrderRequest{OrderId: orderID, RequestId: requestID, AmountMinor: amount, Reason: "chaos"}
	for try := range callTries {
		if try > 0 {
			if !c.pause(ctx, try) {
				return
			}
			to = c.replica()
		}
		cctx, cancel := context.WithTimeout(ctx, chargeTimeout)
		resp, err := to.RefundOrder(cctx, req)
		cancel()
		c.w.hist.refundAnswered(orderID, requestID, resp, err)
		if err == nil || !retryable(err) {
			return
		}
	}
}

func (c *checkout) cancel(ctx context.Context, orderID string) {
	for try := range callTries {
		if try > 0 && !c.pause(ctx, try) {
			return
		}
		cctx, cancel := context.WithTimeout(ctx, createTimeout)
		resp, err := c.replica().CancelOrder(cctx, &settlev1.CancelOrderRequest{OrderId: orderID, Reason: "customer left"})
		cancel()
		if err == nil {
			if resp.GetOrder().GetState() == settlev1.OrderState_ORDER_STATE_CANCELED {
				c.w.hist.canceledOrder(orderID)
			}
			return
		}
		if status.Code(err) == codes.FailedPrecondition {
			return // no longer PENDING: fine
		}
		c.w.hist.failed(err)
		if !retryable(err) {
			return
		}
	}
}

// pause waits before the try'th try of a call.
func (c *checkout) pause(ctx context.Context, try int) bool {
	d := time.Duration(try)*100*time.Millisecond + time.Duration(c.rng.Int64N(int64(200*time.Millisecond)))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// retryable reports whether a call that failed with err may be sent again
// with the same keys: the server was unreachable, gone or too slow.
func retryable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Internal, codes.Unknown, codes.Aborted, codes.ResourceExhausted:
		return true
	}
	return false
}

// holds is what a merchant does with an order it authorized: capture all
// of it, a part (final), several parts (final=false), two captures at once
// that do not both fit (two operators, or a retry racing a click), a
// capture of more than is left, a void, a void racing a capture; or
// nothing, leaving the hold open. A hold that lapses (lapses) is mostly
// left to lapse, and sometimes captured after capture_before, when only
// the gateway's answer decides.
func (c *checkout) holds(ctx context.Context, o *settlev1.Order, n int, lapses bool) {
	amount := o.GetAuthorized().GetAmountMinor()
	if amount <= 0 {
		amount = o.GetAmount().GetAmountMinor()
	}
	k := 0
	capture := func(to settlev1.OrderServiceClient, minor int64, final bool) *settlev1.CaptureOrderResponse {
		k++
		return c.capture(ctx, to, o.GetId(), fmt.Sprintf("capture-%d-%d-%d", c.client, n, k), minor, final)
	}
	void := func(to settlev1.OrderServiceClient) {
		k++
		c.void(ctx, to, o.GetId(), fmt.Sprintf("void-%d-%d-%d", c.client, n, k))
	}
	part := func(most int64) int64 { return 1 + c.rng.Int64N(max(1, most)) }
	x := c.rng.Float64()
	if lapses {
		if x < 0.7 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-c.stop:
			return
		case <-time.After(lapseAfter + time.Duration(c.rng.Int64N(int64(time.Second)))):
		}
		capture(c.replica(), 0, true)
		return
	}
	switch {
	case x < 0.2: // all of it
		capture(c.replica(), 0, true)
	case x < 0.35: // a part, releasing the rest
		capture(c.replica(), part(amount-1), true)
	case x < 0.5: // several parts, perhaps the rest at the end
		for range 2 + c.rng.IntN(2) {
			if capture(c.replica(), part(amount/3), false) == nil {
				return
			}
		}
		if c.rng.Float64() < 0.5 {
			capture(c.replica(), 0, true)
		}
	case x < 0.7: // two captures at once that do not both fit
		each := amount/2 + part(amount/2)
		final := c.rng.Float64() < 0.5
		c.together(func(cc *checkout, to settlev1.OrderServiceClient, i int) {
			cc.capture(ctx, to, o.GetId(), fmt.Sprintf("capture-%d-%d-x%d", c.client, n, i), each, final)
		}, nil)
	case x < 0.8: // a part, then more than is left
		first := part(amount - 1)
		if capture(c.replica(), first, false) == nil {
			return
		}
		capture(c.replica(), amount-first+part(amount), true)
	case x < 0.9:
		void(c.replica())
	case x < 0.97: // a void racing a capture
		c.together(func(cc *checkout, to settlev1.OrderServiceClient, i int) {
			cc.capture(ctx, to, o.GetId(), fmt.Sprintf("capture-%d-%d-r", c.client, n), 0, true)
		}, func(cc *checkout, to settlev1.OrderServiceClient, i int) {
			cc.void(ctx, to, o.GetId(), fmt.Sprintf("void-%d-%d-r", c.client, n))
		})
	default: // left open
	}
}

// together runs first and second (or first twice, when second is nil) at
// once against two replicas, each with its own generator for its retries.
func (c *checkout) together(first, second func(cc *checkout, to settlev1.OrderServiceClient, i int)) {
	if second == nil {
		second = first
	}
	i := c.rng.IntN(len(c.w.clients))
	j := (i + 1) % len(c.w.clients)
	seeds := [2]uint64{c.rng.Uint64(), c.rng.Uint64()}
	var wg sync.WaitGroup
	for k, f := range []func(*checkout, settlev1.OrderServiceClient, int){first, second} {
		to := c.w.clients[[2]int{i, j}[k]]
		wg.Go(func() {
			f(&checkout{w: c.w, rng: rand.New(rand.NewPCG(seeds[k], 3)), client: c.client, stop: c.stop}, to, k)
		})
	}
	wg.Wait()
}

// capture sends one capture request, and again with the same request_id
// while it fails, as a client that lost the answer does. It returns the
// answer, or nil when there was none (or a refusal).
func (c *checkout) capture(ctx context.Context, to settlev1.OrderServiceClient, orderID, requestID string, amount int64, final bool) *settlev1.CaptureOrderResponse {
	req := &settlev1.CaptureOrderRequest{OrderId: orderID, RequestId: requestID, AmountMinor: amount, Final: proto.Bool(final)}
	for try := range callTries {
		if try > 0 {
			if !c.pause(ctx, try) {
				return nil
			}
			to = c.replica()
		}
		cctx, cancel := context.WithTimeout(ctx, chargeTimeout)
		resp, err := to.CaptureOrder(cctx, req)
		cancel()
		c.w.hist.holdAnswered(true, orderID, requestID, resp.GetCapture().GetId(),
			resp.GetCapture().GetState() == settlev1.CaptureState_CAPTURE_STATE_SUCCEEDED, err)
		if err == nil {
			return resp
		}
		if !retryable(err) {
			return nil
		}
	}
	return nil
}

// void sends one void request, and again with the same request_id while
// it fails.
func (c *checkout) void(ctx context.Context, to settlev1.OrderServiceClient, orderID, requestID string) {
	req := &settlev1.VoidOrderRequest{OrderId: orderID, RequestId: requestID, Reason: "chaos"}
	for try := range callTries {
		if try > 0 {
			if !c.pause(ctx, try) {
				return
			}
			to = c.replica()
		}
		cctx, cancel := context.WithTimeout(ctx, chargeTimeout)
		resp, err := to.VoidOrder(cctx, req)
		cancel()
		c.w.hist.holdAnswered(false, orderID, requestID, resp.GetVoid().GetId(),
			resp.GetVoid().GetState() == settlev1.VoidState_VOID_STATE_SUCCEEDED, err)
		if err == nil || !retryable(err) {
			return
		}
	}
}
