package order

// EventAbout says which of Settle's records a GatewayEvent's AttemptID
// names: the gateway reference of an attempt, of a capture or of a void.
type EventAbout string

// What a gateway event can be about.
const (
	// EventAboutAttempt: AttemptID is an attempt's id (a charge or an
	// authorization, and its lapse). The zero value, so that adapters
	// without captures need not set it.
	EventAboutAttempt EventAbout = ""
	// EventAboutCapture: AttemptID is a capture's id (CaptureRequest's
	// CaptureID); ObjectID and ChargeID are the gateway's capture id.
	EventAboutCapture EventAbout = "capture"
	// EventAboutVoid: AttemptID is a void's id (VoidRequest's VoidID);
	// ObjectID and ChargeID are the gateway's void id.
	EventAboutVoid EventAbout = "void"
	// EventAboutRefund: AttemptID is a refund's id (RefundRequest's
	// RefundID); ObjectID and ChargeID are the gateway's refund id.
	EventAboutRefund EventAbout = "refund"
)
