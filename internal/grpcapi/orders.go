// Package grpcapi is Settle's gRPC transport: it turns requests into calls
// of the domain and the domain's answers and errors into responses, and
// sets up the server with its interceptors, health and reflection.
package grpcapi

import (
	"context"
	"log/slog"
	"time"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/order"
)

// orderServer implements settlev1.OrderServiceServer.
type orderServer struct {
	settlev1.UnimplementedOrderServiceServer
	svc     *order.Service
	hub     *watchHub
	watcher Watcher
	events  EventStore
	log     *slog.Logger
	// watchLifetime ends a WatchOrder stream that has run this long.
	watchLifetime time.Duration
}

func (s *orderServer) CreateOrder(ctx context.Context, req *settlev1.CreateOrderRequest) (*settlev1.CreateOrderResponse, error) {
	n, err := newOrderFromProto(req)
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	o, err := s.svc.Create(ctx, merchant(ctx), n)
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	return &settlev1.CreateOrderResponse{Order: orderToProto(o)}, nil
}

func (s *orderServer) GetOrder(ctx context.Context, req *settlev1.GetOrderRequest) (*settlev1.GetOrderResponse, error) {
	var (
		o   order.Order
		err error
	)
	switch key := req.GetKey().(type) {
	case *settlev1.GetOrderRequest_Id:
		o, err = s.svc.Get(ctx, order.ForMerchant(merchant(ctx)), canonicalID(key.Id))
	case *settlev1.GetOrderRequest_MerchantReference:
		o, err = s.svc.GetByReference(ctx, merchant(ctx), key.MerchantReference)
	default:
		err = &order.ValidationError{Field: "key", Reason: "set id or merchant_reference"}
	}
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	return &settlev1.GetOrderResponse{Order: orderToProto(o)}, nil
}

func (s *orderServer) ChargeOrder(ctx context.Context, req *settlev1.ChargeOrderRequest) (*settlev1.ChargeOrderResponse, error) {
	o, a, err := s.svc.Charge(ctx, merchant(ctx), chargeInputFromProto(req))
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	return &settlev1.ChargeOrderResponse{Order: orderToProto(o), Attempt: attemptToProto(a), NextAction: nextActionToProto(a),
		NoAttemptReason: noAttemptReason(o, a)}, nil
}

func (s *orderServer) CreateAndChargeOrder(ctx context.Context, req *settlev1.CreateAndChargeOrderRequest) (*settlev1.CreateAndChargeOrderResponse, error) {
	n, err := newOrderFromProto(&settlev1.CreateOrderRequest{MerchantReference: req.GetMerchantReference(),
		Amount: req.GetAmount(), PaymentMethod: req.GetPaymentMethod(), Gateway: req.GetGateway(), Capture: req.GetCapture(),
		Routes: req.GetRoutes()})
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	o, a, err := s.svc.CreateAndCharge(ctx, merchant(ctx), n, createAndChargeInputFromProto(req))
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	return &settlev1.CreateAndChargeOrderResponse{Order: orderToProto(o), Attempt: attemptToProto(a), NextAction: nextActionToProto(a),
		NoAttemptReason: noAttemptReason(o, a)}, nil
}

func (s *orderServer) RefundOrder(ctx context.Context, req *settlev1.RefundOrderRequest) (*settlev1.RefundOrderResponse, error) {
	o, r, err := s.svc.Refund(ctx, order.ForMerchant(merchant(ctx)), order.ActorAPI, order.RefundInput{
		OrderID: canonicalID(req.GetOrderId()), RequestID: req.GetRequestId(), AmountMinor: req.GetAmountMinor(),
		Reason: req.GetReason(),
	})
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	return &settlev1.RefundOrderResponse{Order: orderToProto(o), Refund: refundToProto(r)}, nil
}

func (s *orderServer) CaptureOrder(ctx context.Context, req *settlev1.CaptureOrderRequest) (*settlev1.CaptureOrderResponse, error) {
	o, c, err := s.svc.Capture(ctx, order.ForMerchant(merchant(ctx)), order.ActorAPI, order.CaptureInput{
		OrderID: canonicalID(req.GetOrderId()), RequestID: req.GetRequestId(), AmountMinor: req.GetAmountMinor(),
		// Unset is final: the rest of the hold is released.
		Final: req.Final == nil || req.GetFinal(),
	})
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	return &settlev1.CaptureOrderResponse{Order: orderToProto(o), Capture: captureToProto(c)}, nil
}

func (s *orderServer) VoidOrder(ctx context.Context, req *settlev1.VoidOrderRequest) (*settlev1.VoidOrderResponse, error) {
	o, v, err := s.svc.Void(ctx, order.ForMerchant(merchant(ctx)), order.ActorAPI, order.VoidInput{
		OrderID: canonicalID(req.GetOrderId()), RequestID: req.GetRequestId(), Reason: req.GetReason(),
	})
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	return &settlev1.VoidOrderResponse{Order: orderToProto(o), Void: voidToProto(v)}, nil
}

func (s *orderServer) CancelOrder(ctx context.Context, req *settlev1.CancelOrderRequest) (*settlev1.CancelOrderResponse, error) {
	o, err := s.svc.Cancel(ctx, merchant(ctx), canonicalID(req.GetOrderId()), req.GetReason())
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	return &settlev1.CancelOrderResponse{Order: orderToProto(o)}, nil
}
