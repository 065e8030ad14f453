// Package openapi embeds Adyen's OpenAPI definitions (see README.md), which
// the fake Adyen server checks its traffic against.
package openapi

import _ "embed"

// Checkout is the Checkout API v71 definition (CheckoutService-v71.json).
//
//go:embed CheckoutService-v71.json
var Checkout []byte

// Webhooks is the standard notifications' definition (Webhooks-v1.json).
//
//go:embed Webhooks-v1.json
var Webhooks []byte
