package grpcapi

import (
	"context"
	"encoding/base64"
	"log/slog"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/order"
)

// OpsStore is what operators read beyond the order service.
type OpsStore interface {
	ListOrders(ctx context.Context, f order.ListFilter) ([]order.Order, error)
	History(ctx context.Context, id string) ([]order.Event, []order.Attempt, error)
	Stats(ctx context.Context) (order.Stats, error)
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
	checker Checker
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
	f := order.ListFilter{Limit: int(req.GetPageSize()), MinAge: time.Duration(req.GetMinAgeSeconds()) * time.Second}
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

func (s *opsServer) GetOrderHistory(ctx context.Context, req *settlev1.GetOrderHistoryRequest) (*settlev1.GetOrderHistoryResponse, error) {
	o, err := s.svc.Get(ctx, "", canonicalID(req.GetOrderId()))
	if err != nil {
		return nil, toStatus(ctx, s.log, fieldName(err, "order_id"))
	}
	events, attempts, err := s.store.History(ctx, o.ID)
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	resp := &settlev1.GetOrderHistoryResponse{Order: orderToProto(o), ReconcileCount: int32(o.ReconcileCount), LastError: o.LastError}
	for _, e := range events {
		resp.Events = append(resp.Events, &settlev1.OrderEvent{
			FromState: stateToProto[e.From], ToState: stateToProto[e.To], Event: string(e.Name), Actor: string(e.Actor),
			Reason: e.Reason, AttemptId: e.AttemptID, CreateTime: timestamp(e.CreatedAt),
		})
	}
	for _, a := range attempts {
		resp.Attempts = append(resp.Attempts, attemptToProto(&a))
	}
	return resp, nil
}

func (s *opsServer) ReconcileOrder(ctx context.Context, req *settlev1.ReconcileOrderRequest) (*settlev1.ReconcileOrderResponse, error) {
	o, err := s.svc.Get(ctx, "", canonicalID(req.GetOrderId()))
	if err != nil {
		return nil, toStatus(ctx, s.log, fieldName(err, "order_id"))
	}
	if o.State == order.StateCharging {
		checked, ok, err := s.checker.CheckNow(ctx, o.ID)
		if err != nil {
			return nil, toStatus(ctx, s.log, err)
		}
		if ok {
			o = checked
		} else if o, err = s.svc.Get(ctx, "", o.ID); err != nil {
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
	o, err := s.svc.Resolve(ctx, canonicalID(req.GetOrderId()), resolutions[req.GetResolution()], req.GetGatewayChargeId(),
		req.GetReason(), operator(ctx))
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	return &settlev1.ResolveOrderResponse{Order: orderToProto(o)}, nil
}

func (s *opsServer) Stats(ctx context.Context, _ *settlev1.StatsRequest) (*settlev1.StatsResponse, error) {
	st, err := s.store.Stats(ctx)
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
	return resp, nil
}

// fieldName renames the field of a validation error to the request's.
func fieldName(err error, field string) error {
	if v, ok := err.(*order.ValidationError); ok {
		return &order.ValidationError{Field: field, Reason: v.Reason}
	}
	return err
}
