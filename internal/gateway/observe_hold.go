package gateway

// The operations of an authorization an adapter reports to its Observer
// (order.Capturer). Call.AttemptID is then the capture's or the void's id.
const (
	OpCapture       = "capture"
	OpLookupCapture = "lookup_capture"
	OpVoid          = "void"
	OpLookupVoid    = "lookup_void"
)
