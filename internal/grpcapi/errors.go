package grpcapi

import (
	"context"
	"errors"
	"log/slog"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/settlepay/settle/internal/order"
)

// toStatus is the one place that turns errors into gRPC statuses. Messages
// are written here or by the domain for the client; internal error text
// (SQL, network, gateway) never reaches a client.
func toStatus(ctx context.Context, log *slog.Logger, err error) error {
	var (
		valErr  *order.ValidationError
		confErr *order.ConflictError
		stErr   *order.StateError
		limErr  *order.RefundLimitError
		chErr   *order.ChargeFoundError
		unsErr  *order.GatewayUnsureError
		rstErr  *order.RefundStateError
		capErr  *order.CaptureLimitError
		holdErr *order.HoldError
		actErr  *order.ActionError
		revErr  *order.ReviewResolvedError
		rchErr  *order.ReviewChargeFoundError
		dopErr  *order.DisputeOpenError
		dunErr  *order.DisputeUnsupportedError
		rvErr   *order.RoutesVersionError
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &valErr):
		return status.Error(codes.InvalidArgument, valErr.Error())
	case errors.As(err, new(*malformedError)):
		return status.Error(codes.InvalidArgument, "the request is not a valid protobuf message")
	case errors.As(err, &rvErr):
		return status.Error(codes.Aborted, rvErr.Error())
	case errors.Is(err, order.ErrRoutesUnsupported):
		return status.Error(codes.Unimplemented, "this server keeps no route rules")
	case errors.As(err, &dopErr):
		return status.Error(codes.FailedPrecondition, dopErr.Error())
	case errors.As(err, &dunErr):
		return status.Error(codes.FailedPrecondition, dunErr.Error())
	case errors.Is(err, order.ErrDisputeNotFound):
		return status.Error(codes.NotFound, "dispute not found")
	case errors.Is(err, order.ErrDisputeOutcomeUnknown):
		log.WarnContext(ctx, "gateway did not answer an accept of a dispute", "error", err)
		return status.Error(codes.Unavailable, "the gateway did not answer; the dispute is left as it was, and the gateway's next event settles it; the call may be repeated")
	case errors.Is(err, order.ErrDisputesUnsupported):
		return status.Error(codes.Unimplemented, "this server keeps no disputes")
	case errors.Is(err, order.ErrEventNotFound):
		return status.Error(codes.NotFound, "event not found")
	case errors.Is(err, order.ErrNotFound):
		return status.Error(codes.NotFound, "order not found")
	case errors.Is(err, order.ErrRefundNotFound):
		return status.Error(codes.NotFound, "refund not found")
	case errors.Is(err, order.ErrReviewItemNotFound):
		return status.Error(codes.NotFound, "review item not found")
	case errors.As(err, &revErr):
		return status.Error(codes.FailedPrecondition, revErr.Error())
	case errors.As(err, &rchErr):
		return status.Error(codes.FailedPrecondition, rchErr.Error())
	case errors.As(err, &rstErr):
		return status.Error(codes.FailedPrecondition, rstErr.Error())
	case errors.As(err, &confErr):
		return status.Error(codes.AlreadyExists, confErr.Error())
	case errors.As(err, &stErr):
		return status.Error(codes.FailedPrecondition, stErr.Error())
	case errors.As(err, &limErr):
		return status.Error(codes.FailedPrecondition, limErr.Error())
	case errors.As(err, &capErr):
		return status.Error(codes.FailedPrecondition, capErr.Error())
	case errors.As(err, &holdErr):
		return status.Error(codes.FailedPrecondition, holdErr.Error())
	case errors.As(err, &actErr):
		return status.Error(codes.FailedPrecondition, actErr.Error())
	case errors.Is(err, order.ErrCapturesUnsupported):
		return status.Error(codes.FailedPrecondition, "the order was not created with capture CAPTURE_MODE_MANUAL on a gateway that can capture: "+
			"an automatic order is paid by its charge, refund it instead")
	case errors.As(err, &chErr):
		return status.Error(codes.FailedPrecondition, chErr.Error())
	case errors.As(err, &unsErr):
		log.WarnContext(ctx, "gateway could not say whether an attempt charged", "attempt_id", unsErr.AttemptID, "error", unsErr.Err)
		return status.Error(codes.Unavailable, unsErr.Error())
	case errors.Is(err, order.ErrRefundsUnsupported):
		return status.Error(codes.FailedPrecondition, "the order's gateway does not support refunds")
	case errors.Is(err, order.ErrGatewayRefused):
		// Not a decline, and not the client's fault: Settle's own
		// configuration is wrong. The gateway call's line is logged at ERROR.
		return status.Error(codes.Internal, "the gateway refused Settle's credentials or request: a configuration error at Settle, "+
			"not a card decline; nothing was charged and the order is PENDING")
	case errors.Is(err, order.ErrBudgetExhausted):
		// Not a failure of the call: the gateway account's shared request
		// budget is used up for the moment, and nothing was sent.
		st := status.New(codes.Unavailable, "the gateway's request budget is used up for the moment; nothing was sent; retry in a second with the same request_id")
		if d, derr := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(order.BudgetRetryAfter)}); derr == nil {
			st = d
		}
		return st.Err()
	case errors.Is(err, order.ErrMisrouted):
		// Transient, but it should not last: the distributed database
		// keeps running calls away from their merchant's node (on Citus,
		// not delegated to the worker), so operators are told at ERROR.
		log.ErrorContext(ctx, "storage ran the call away from its merchant's node after retries; nothing was written", "error", err)
		return status.Error(codes.Unavailable, "storage could not route the call to the order's node; nothing was written; retry with the same request_id")
	case errors.Is(err, order.ErrUnavailable):
		log.WarnContext(ctx, "storage unavailable", "error", err)
		return status.Error(codes.Unavailable, "storage is unavailable; retry with the same request_id")
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, "canceled")
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, "deadline exceeded; retry with the same request_id")
	}
	log.ErrorContext(ctx, "internal error", "error", err)
	return status.Error(codes.Internal, "internal error")
}
