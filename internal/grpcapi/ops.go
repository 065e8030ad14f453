package grpcapi

import (
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/audit"
	"github.com/settlepay/settle/internal/order"
)

// OpsStore is what operators read beyond the order service.
type OpsStore interface {
	ListOrders(ctx context.Context, f order.ListFilter) ([]order.Order, error)
	// OrderHistory returns an order with one page of its history and,
	// withOperations, its refunds, captures and voids, all as they stood
	// at one moment.
	OrderHistory(ctx context.Context, merchantID, id string, p order.HistoryPage, withOperations bool) (order.History, error)
	Stats(ctx context.Context, scope order.Scope) (order.Stats, error)
	// ReviewItems returns a page of the review queue.
	ReviewItems(ctx context.Context, f order.ReviewFilter) ([]order.ReviewItem, error)
	// Routing returns an order's routes, each with the rule and version
	// that placed it.
	Routing(ctx context.Context, merchantID, orderID string) (order.Routing, error)
}

// Checker checks a CHARGING order with its gateway now.
type Checker interface {
	CheckNow(ctx context.Context, id string) (order.Order, bool, error)
}

// opsServer implements settlev1.OpsServiceServer.
type opsServer struct {
	settlev1.UnimplementedOpsServiceServer
	svc     *order.Service
	store   OpsStore
	events  EventStore
	checker Checker
	auditor *audit.Auditor
	log     *slog.Logger
}

var protoToState = func() map[settlev1.OrderState]order.State {
	m := map[settlev1.OrderState]order.State{}
	for s, p := range stateToProto {
		m[p] = s
	}
	return m
}()

func (s *opsServer) ListOrders(ctx context.Context, req *settlev1.ListOrdersRequest) (*settlev1.ListOrdersResponse, error) {
	f := order.ListFilter{Scope: opsScope(ctx), Limit: int(req.GetPageSize()), MinAge: time.Duration(req.GetMinAgeSeconds()) * time.Second}
	switch {
	case f.Limit == 0:
		f.Limit = 50
	case f.Limit < 0 || f.Limit > 500:
		return nil, toStatus(ctx, s.log, &order.ValidationError{Field: "page_size", Reason: "must be between 0 and 500"})
	}
	if req.GetMinAgeSeconds() < 0 || req.GetMinAgeSeconds() > 10*365*86400 {
		return nil, toStatus(ctx, s.log, &order.ValidationError{Field: "min_age_seconds", Reason: "is out of range"})
	}
	if req.GetState() != settlev1.OrderState_ORDER_STATE_UNSPECIFIED {
		st, ok := protoToState[req.GetState()]
		if !ok {
			return nil, toStatus(ctx, s.log, &order.ValidationError{Field: "state", Reason: "is not a known state"})
		}
		f.State = st
	}
	if tok := req.GetPageToken(); tok != "" {
		var ok bool
		if f.AfterUpdated, f.AfterID, ok = decodePageToken(tok); !ok {
			return nil, toStatus(ctx, s.log, &order.ValidationError{Field: "page_token", Reason: "is not a token from a previous page"})
		}
	}
	orders, err := s.store.ListOrders(ctx, f)
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	resp := &settlev1.ListOrdersResponse{}
	for _, o := range orders {
		resp.Orders = append(resp.Orders, orderToProto(o))
	}
	if len(orders) == f.Limit {
		last := orders[len(orders)-1]
		resp.NextPageToken = encodePageToken(last.UpdatedAt, last.ID)
	}
	return resp, nil
}

func encodePageToken(t time.Time, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(t.UTC().Format(time.RFC3339Nano) + "|" + id))
}

func decodePageToken(tok string) (time.Time, string, bool) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return time.Time{}, "", false
	}
	ts, id, ok := strings.Cut(string(b), "|")
	t, err := time.Parse(time.RFC3339Nano, ts)
	if !ok || err != nil || order.CheckID("page_token", id) != nil {
		return time.Time{}, "", false
	}
	return t, canonicalID(id), true
}

// History pages: AIP-158, with a larger page size taken as the maximum.
const (
	defaultHistoryPage = 100
	maxHistoryPage     = 1000
)

func (s *opsServer) GetOrderHistory(ctx context.Context, req *settlev1.GetOrderHistoryRequest) (*settlev1.GetOrderHistoryResponse, error) {
	o, err := s.svc.Get(ctx, opsScope(ctx), canonicalID(req.GetOrderId()))
	if err != nil {
		return nil, toStatus(ctx, s.log, fieldName(err, "order_id"))
	}
	p := order.HistoryPage{Limit: int(req.GetPageSize())}
	switch {
	case p.Limit < 0:
		return nil, toStatus(ctx, s.log, &order.ValidationError{Field: "page_size", Reason: "must not be negative"})
	case p.Limit == 0:
		p.Limit = defaultHistoryPage
	case p.Limit > maxHistoryPage:
		p.Limit = maxHistoryPage
	}
	if tok := req.GetPageToken(); tok != "" {
		var ok bool
		if p, ok = decodeHistoryToken(tok, o.ID, p.Limit); !ok {
			return nil, toStatus(ctx, s.log, &order.ValidationError{Field: "page_token", Reason: "is not a token from a previous page of this order"})
		}
	}
	// One more than a page of each says whether there is a next page.
	want := p.Limit
	p.Limit++
	// The reply shows the order as the history's snapshot holds it, not as
	// Get read it before (a settle may have landed since). An order has
	// few refunds, captures and voids: they come whole, on the first page.
	h, err := s.store.OrderHistory(ctx, o.MerchantID, o.ID, p, req.GetPageToken() == "")
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	o, events, attempts := h.Order, h.Events, h.Attempts
	more := len(events) > want || len(attempts) > want
	events, attempts = events[:min(len(events), want)], attempts[:min(len(attempts), want)]
	resp := &settlev1.GetOrderHistoryResponse{Order: orderToProto(o), ReconcileCount: int32(o.ReconcileCount), LastError: o.LastError}
	for _, e := range events {
		resp.Events = append(resp.Events, &settlev1.OrderEvent{
			FromState: stateToProto[e.From], ToState: stateToProto[e.To], Event: e.Name, Actor: string(e.Actor),
			Reason: e.Reason, AttemptId: e.AttemptID, RefundId: e.RefundID, CaptureId: e.CaptureID, VoidId: e.VoidID,
			CreateTime: timestamp(e.CreatedAt),
		})
	}
	var routes []order.Route
	if len(attempts) > 0 {
		r, err := s.store.Routing(ctx, o.MerchantID, o.ID)
		if err != nil {
			return nil, toStatus(ctx, s.log, err)
		}
		routes = r.Routes
	}
	for _, a := range attempts {
		p := attemptToProto(&a)
		// Each attempt went to one of the order's routes, placed by the
		// merchant's rule of its day.
		if i := slices.IndexFunc(routes, func(r order.Route) bool { return r.Gateway == o.AttemptGateway(a) }); i >= 0 {
			p.RouteRule, p.RouteVersion = routes[i].Rule, routes[i].RouteVersion
		}
		resp.Attempts = append(resp.Attempts, p)
	}
	for _, r := range h.Refunds {
		resp.Refunds = append(resp.Refunds, refundToProto(r))
	}
	for _, e := range h.RefundEvents {
		resp.RefundEvents = append(resp.RefundEvents, &settlev1.RefundEvent{
			RefundId: e.RefundID, FromState: refundStateToProto[e.From], ToState: refundStateToProto[e.To],
			Event: e.Name, Actor: string(e.Actor), Reason: e.Reason, CreateTime: timestamp(e.CreatedAt),
		})
	}
	for _, c := range h.Captures {
		resp.Captures = append(resp.Captures, captureToProto(c))
	}
	for _, e := range h.CaptureEvents {
		resp.CaptureEvents = append(resp.CaptureEvents, &settlev1.CaptureEvent{
			CaptureId: e.CaptureID, FromState: captureStateToProto[e.From], ToState: captureStateToProto[e.To],
			Event: e.Name, Actor: string(e.Actor), Reason: e.Reason, CreateTime: timestamp(e.CreatedAt),
		})
	}
	for _, v := range h.Voids {
		resp.Voids = append(resp.Voids, voidToProto(v))
	}
	for _, e := range h.VoidEvents {
		resp.VoidEvents = append(resp.VoidEvents, &settlev1.VoidEvent{
			VoidId: e.VoidID, FromState: voidStateToProto[e.From], ToState: voidStateToProto[e.To],
			Event: e.Name, Actor: string(e.Actor), Reason: e.Reason, CreateTime: timestamp(e.CreatedAt),
		})
	}
	if more {
		// The cursor of a list that is complete stays where it was.
		next := p
		if len(events) > 0 {
			next.AfterSeq = events[len(events)-1].Seq
		}
		if len(attempts) > 0 {
			last := attempts[len(attempts)-1]
			next.AfterAttemptCreated, next.AfterAttemptID = last.CreatedAt, last.ID
		}
		resp.NextPageToken = encodeHistoryToken(o.ID, next)
	}
	return resp, nil
}

// encodeHistoryToken writes where the next page of an order's history
// begins. The token names its order, so that it is refused for another.
func encodeHistoryToken(orderID string, p order.HistoryPage) string {
	created := ""
	if !p.AfterAttemptCreated.IsZero() {
		created = p.AfterAttemptCreated.UTC().Format(time.RFC3339Nano)
	}
	return base64.RawURLEncoding.EncodeToString([]byte(strings.Join(
		[]string{"h1", orderID, strconv.FormatInt(p.AfterSeq, 10), created, p.AfterAttemptID}, "|")))
}

// decodeHistoryToken reads a token of encodeHistoryToken for orderID, with
// the page size limit.
func decodeHistoryToken(tok, orderID string, limit int) (order.HistoryPage, bool) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return order.HistoryPage{}, false
	}
	f := strings.Split(string(b), "|")
	if len(f) != 5 || f[0] != "h1" || f[1] != orderID {
		return order.HistoryPage{}, false
	}
	p := order.HistoryPage{Limit: limit}
	if p.AfterSeq, err = strconv.ParseInt(f[2], 10, 64); err != nil || p.AfterSeq < 0 {
		return order.HistoryPage{}, false
	}
	if f[3] != "" || f[4] != "" {
		if p.AfterAttemptCreated, err = time.Parse(time.RFC3339Nano, f[3]); err != nil || order.CheckID("page_token", f[4]) != nil {
			return order.HistoryPage{}, false
		}
		p.AfterAttemptID = f[4]
	}
	return p, true
}

func (s *opsServer) ReconcileOrder(ctx context.Context, req *settlev1.ReconcileOrderRequest) (*settlev1.ReconcileOrderResponse, error) {
	o, err := s.svc.Get(ctx, opsScope(ctx), canonicalID(req.GetOrderId()))
	if err != nil {
		return nil, toStatus(ctx, s.log, fieldName(err, "order_id"))
	}
	if o.State.AwaitsGateway() {
		checked, ok, err := s.checker.CheckNow(ctx, o.ID)
		if err != nil {
			return nil, toStatus(ctx, s.log, err)
		}
		if ok {
			o = checked
		} else if o, err = s.svc.Get(ctx, opsScope(ctx), o.ID); err != nil {
			return nil, toStatus(ctx, s.log, err)
		}
	}
	return &settlev1.ReconcileOrderResponse{Order: orderToProto(o)}, nil
}

var resolutions = map[settlev1.Resolution]order.EventName{
	settlev1.Resolution_RESOLUTION_PAID:     order.EventResolvePaid,
	settlev1.Resolution_RESOLUTION_PENDING:  order.EventResolvePending,
	settlev1.Resolution_RESOLUTION_CANCELED: order.EventResolveCanceled,
}

func (s *opsServer) ResolveOrder(ctx context.Context, req *settlev1.ResolveOrderRequest) (*settlev1.ResolveOrderResponse, error) {
	o, err := s.svc.Resolve(ctx, opsScope(ctx), canonicalID(req.GetOrderId()), resolutions[req.GetResolution()], req.GetGatewayChargeId(),
		req.GetReason(), operator(ctx))
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	return &settlev1.ResolveOrderResponse{Order: orderToProto(o)}, nil
}

func (s *opsServer) Stats(ctx context.Context, _ *settlev1.StatsRequest) (*settlev1.StatsResponse, error) {
	st, err := s.store.Stats(ctx, opsScope(ctx))
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	resp := &settlev1.StatsResponse{ReconcileBacklog: st.Backlog, NeedsReview: st.ByState[order.StateNeedsReview]}
	for _, state := range order.States {
		resp.States = append(resp.States, &settlev1.StateCount{State: stateToProto[state], Count: st.ByState[state]})
	}
	if !st.OldestCharging.IsZero() {
		resp.OldestChargingTime = timestamppb.New(st.OldestCharging)
	}
	rs := st.Refunds
	for _, state := range order.RefundStates {
		resp.RefundStates = append(resp.RefundStates,
			&settlev1.RefundStateCount{State: refundStateToProto[state], Count: rs.ByState[state]})
	}
	if !rs.OldestRefunding.IsZero() {
		resp.OldestRefundingTime = timestamppb.New(rs.OldestRefunding)
	}
	return resp, nil
}

// RefundOrder refunds an order of the operator's scope for them, who are
// the refund's actor; the reason is required.
func (s *opsServer) RefundOrder(ctx context.Context, req *settlev1.OpsServiceRefundOrderRequest) (*settlev1.OpsServiceRefundOrderResponse, error) {
	if err := order.CheckReason("reason", req.GetReason(), true); err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	o, r, err := s.svc.Refund(ctx, opsScope(ctx), operator(ctx), order.RefundInput{
		OrderID: canonicalID(req.GetOrderId()), RequestID: req.GetRequestId(), AmountMinor: req.GetAmountMinor(),
		Reason: req.GetReason(),
	})
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	return &settlev1.OpsServiceRefundOrderResponse{Order: orderToProto(o), Refund: refundToProto(r)}, nil
}

// CaptureOrder captures an order of the operator's scope for them, who
// are the capture's actor; the reason is required.
func (s *opsServer) CaptureOrder(ctx context.Context, req *settlev1.OpsServiceCaptureOrderRequest) (*settlev1.OpsServiceCaptureOrderResponse, error) {
	o, c, err := s.svc.Capture(ctx, opsScope(ctx), operator(ctx), order.CaptureInput{
		OrderID: canonicalID(req.GetOrderId()), RequestID: req.GetRequestId(), AmountMinor: req.GetAmountMinor(),
		Final: req.Final == nil || req.GetFinal(), Reason: req.GetReason(),
	})
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	return &settlev1.OpsServiceCaptureOrderResponse{Order: orderToProto(o), Capture: captureToProto(c)}, nil
}

// VoidOrder voids an order of the operator's scope for them; the reason is
// required.
func (s *opsServer) VoidOrder(ctx context.Context, req *settlev1.OpsServiceVoidOrderRequest) (*settlev1.OpsServiceVoidOrderResponse, error) {
	o, v, err := s.svc.Void(ctx, opsScope(ctx), operator(ctx), order.VoidInput{
		OrderID: canonicalID(req.GetOrderId()), RequestID: req.GetRequestId(), Reason: req.GetReason(),
	})
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	return &settlev1.OpsServiceVoidOrderResponse{Order: orderToProto(o), Void: voidToProto(v)}, nil
}

// fieldName renames the field of a validation error to the request's.
func fieldName(err error, field string) error {
	if v := (*order.ValidationError)(nil); errors.As(err, &v) {
		return &order.ValidationError{Field: field, Reason: v.Reason}
	}
	return err
}

var refundResolutions = map[settlev1.RefundResolution]order.EventName{
	settlev1.RefundResolution_REFUND_RESOLUTION_SUCCEEDED: order.EventResolveSucceeded,
	settlev1.RefundResolution_REFUND_RESOLUTION_FAILED:    order.EventResolveFailed,
}

func (s *opsServer) ResolveRefund(ctx context.Context, req *settlev1.ResolveRefundRequest) (*settlev1.ResolveRefundResponse, error) {
	o, r, err := s.svc.ResolveRefund(ctx, opsScope(ctx), canonicalID(req.GetOrderId()), canonicalID(req.GetRefundId()),
		refundResolutions[req.GetResolution()], req.GetGatewayRefundId(), req.GetReason(), operator(ctx))
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	return &settlev1.ResolveRefundResponse{Order: orderToProto(o), Refund: refundToProto(r)}, nil
}
