// Package adyenfake is a fake Adyen: a real HTTP server (a Server is an
// http.Handler) that speaks the Checkout API v71 under /v71, so that a
// client's base URL is the fake's URL + "/v71", and sends signed
// notifications as Adyen does. Like the simulator (package sim) it keeps a
// ledger of every payment and modification, the truth a test checks
// Settle against, and misbehaves on request.
//
// # Contract checks
//
// Every request to /v71 is checked against Adyen's own definition,
// CheckoutService-v71.json (embedded in package openapi, with the
// libopenapi-validator): one that breaks it (amount.value a string, a
// missing merchantAccount, unparsable JSON) is answered 422 with Adyen's
// ServiceError (status, errorCode "702", message naming the fields,
// errorType "validation"), and nothing is processed. Every answer the fake
// sends is checked against the same definition, and every notification
// against its event's schema in Webhooks-v1.json (the generic
// NotificationRequest does not allow additionalData.hmacSignature, which
// every signed notification carries, so each event's own schema is used).
// A failure there is the fake's own bug: it is logged and listed by
// Server.ContractErrors, which tests assert is empty.
//
// # Requests
//
// Before the contract check: no X-API-Key is 401 (errorCode "000",
// errorType "security"), a wrong one 403 ("010"). After it, a
// merchantAccount other than Config.MerchantAccount is 403 errorCode
// "901" "Invalid Merchant Account", as Adyen answers it. Amounts are in
// minor units.
//
//	POST /v71/payments
//	    paymentMethod {"type":"scheme","storedPaymentMethodId":"<token>"}
//	    with shopperReference (or encryptedCardNumber "test_<token>");
//	    200 with a
//	    PaymentResponse (resultCode, pspReference, merchantReference,
//	    amount; refusalReason and refusalReasonCode when Refused or Error;
//	    action when RedirectShopper). With additionalData.manualCapture
//	    "true" an authorisation is held for captures; without it, it is
//	    captured in full at once (and no CAPTURE is notified).
//	POST /v71/payments/details
//	    details.redirectResult from the 3-D Secure page: 200 Authorised or
//	    Refused; an unknown redirectResult is 422.
//	POST /v71/payments/{pspReference}/captures, /cancels, /refunds
//	    201 with status "received"; the result is a notification (CAPTURE
//	    or CAPTURE_FAILED, CANCELLATION, REFUND or REFUND_FAILED) whose
//	    pspReference is the modification's, originalReference the
//	    payment's, and merchantReference the modification's reference (the
//	    payment's when it has none). An unknown pspReference is 422
//	    errorCode "167". Captures may be partial and several, never beyond
//	    the authorised amount: one that would go beyond, or comes after a
//	    cancel or a lapse, is answered "received" and then CAPTURE with
//	    success "false" (reason "Insufficient balance on payment",
//	    "Authorisation expired", …), as Adyen checks modifications after
//	    accepting them. A cancel of a captured payment, and a refund beyond
//	    what was captured less refunded, fail the same way.
//	POST /v71/cancels
//	    a technical cancel by paymentReference (the payment's reference):
//	    201 "received", then TECHNICAL_CANCEL, whose merchantReference is
//	    the paymentReference and originalReference the payment's
//	    pspReference. Every payment with that reference that holds money
//	    uncaptured (authorised, Received, waiting for 3-D Secure) is
//	    cancelled: success "true". If one of them is captured: success
//	    "false", reason "Payment already captured". A reference with no
//	    payment, or whose payments hold nothing (refused, cancelled,
//	    expired): success "true", meaning nothing is held; Adyen's
//	    documentation does not say what it answers then. Such a
//	    notification's amount is 0 EUR. A payment that arrives after the
//	    cancel is not affected by it.
//	GET /challenge/{id}
//	    the 3-D Secure page (no key; the id is random and only in the
//	    action's url): without ?result it shows two links;
//	    ?result=authorised or ?result=refused ends the payment, sends its
//	    AUTHORISATION notification (whether or not /payments/details is
//	    called later), and redirects to returnUrl with redirectResult.
//
//	GET /reports/download/MerchantAccount/{account}/payments_accounting_report_YYYY_MM_DD.csv
//	    the daily Payment accounting report of the account's payments, for
//	    a report user (basic auth Config.ReportUser, or X-API-Key); see
//	    reports.go. Server.Foreign, AlterAmount and ExtraRefund make the
//	    discrepancies an audit must find.
//
// # Idempotency
//
// Every write honours Idempotency-Key, kept per key whatever the
// endpoint, as Adyen keeps keys per account. A request whose key was
// processed is answered with the first answer, byte for byte, whatever
// its body (Adyen documents that the first answer is returned; it does
// not compare bodies). A request whose key is still in flight is refused
// 422 errorCode "704" "request already processed or in progress" with
// header Transient-Error: true, as Adyen documents (it also allows 409,
// which the definition does not list). An answer lost after processing
// (tok_timeout, tok_5xx_after, tok_drop and the random faults after) is
// kept as the real answer, so a retry with the key learns it; a 500 before
// processing (tok_5xx) frees the key.
//
// # Tokens
//
//	tok_ok, tok_random   Authorised; under Config.Random.
//	tok_decline          Refused, refusalReason "Refused", refusalReasonCode "2".
//	tok_error            resultCode Error, "Acquirer Error" ("4").
//	tok_3ds              RedirectShopper, action {type "redirect", method
//	                     "GET", url the fake's /challenge page}; see above.
//	tok_received         resultCode Received; authorised shortly after, told
//	                     only by the AUTHORISATION notification.
//	tok_timeout          authorises, then holds the answer for
//	                     Config.ClientTimeout or until the client hangs up.
//	tok_5xx_after        authorises, then answers 500.
//	tok_drop             authorises, then drops the connection.
//	tok_5xx              500; nothing is made.
//	tok_slow_<ms>        takes <ms> to authorise (its key in flight), then
//	                     answers.
//	tok_lapse_<ms>       authorises for <ms> only: then EXPIRE is sent, and
//	                     later captures fail.
//	tok_capture_fail     authorises; each capture is CAPTURE success "true",
//	                     then CAPTURE_FAILED (the ledger: failed, nothing taken).
//	tok_refund_fail      authorises; each refund is REFUND, then REFUND_FAILED.
//	tok_silent           authorises; no notification about it, or its
//	                     modifications, is ever sent.
//
// Any hold lapses when its lifetime (Config.AuthorizationLifetime) is
// over with nothing captured: EXPIRE, success "true", pspReference and
// merchantReference the payment's, amount what was held.
//
// Any other token is Refused "Invalid Card Number" ("8"). CAPTURE_FAILED
// and REFUND_FAILED carry success "true", as Adyen sends them: the event
// is the failure.
//
// # Notifications
//
// With Config.NotifyURL set, each outcome is POSTed there as a
// NotificationRequest (live "false", one NotificationRequestItem, eventDate
// set, additionalData.hmacSignature = base64(HMAC-SHA256(hex-decoded
// Config.HMACKey, SigningString(…)))), with basic auth when
// Config.NotifyUser is set, and retried with backoff until the receiver
// answers 2xx "[accepted]" or the fake closes. Config.Notify delays,
// reorders, duplicates and loses them, drawn from a source seeded with
// Config.Seed. Server.Sent lists those accepted.
//
// # Ledger and faults
//
// Server.Ledger lists every payment as it stands (status, authorised,
// captured and refunded amounts, and its captures, cancels, refunds and
// technical cancels, each with its reference, pspReference, status and
// time); Server.TechnicalCancels every technical cancel, also those that
// found no payment. Config.Random injects faults at random (seeded) into
// requests about tok_ok and tok_random payments, their modifications, and
// technical cancels by their reference or by one with no payment.
package adyenfake
