package adyenfake

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	verrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/pb33f/libopenapi-validator/schema_validation"
	"github.com/pb33f/libopenapi/datamodel/high/base"

	"github.com/settlepay/settle/internal/gateway/adyen/adyenfake/openapi"
)

// contract checks traffic against Adyen's definitions. Building it parses
// and compiles both documents, which takes seconds, so one is built per
// process (loadContract) and shared by every Server.
type contract struct {
	checkout validator.Validator
	// The checkout validator is not documented as safe for concurrent
	// use; checks take turns.
	mu sync.Mutex

	schemas schema_validation.SchemaValidator
	// events holds each eventCode's NotificationRequest schema, as the
	// webhooks of Webhooks-v1.json give them.
	events map[string]*base.Schema
}

var (
	contractOnce   sync.Once
	sharedContract *contract
	contractErr    error
)

// loadContract returns the shared contract, building it on first use.
func loadContract() (*contract, error) {
	contractOnce.Do(func() { sharedContract, contractErr = buildContract() })
	return sharedContract, contractErr
}

func buildContract() (*contract, error) {
	doc, err := libopenapi.NewDocument(openapi.Checkout)
	if err != nil {
		return nil, fmt.Errorf("adyenfake: parse CheckoutService-v71.json: %w", err)
	}
	// Adyen's definition is OpenAPI 3.1 but marks two fields (the refund's
	// merchantRefundReason) with 3.0's "nullable", which the validator's
	// OpenAPI vocabulary refuses to compile for 3.1. Without that
	// vocabulary the schemas are plain JSON Schema 2020-12, which ignores
	// the stray keyword and checks everything else.
	v, errs := validator.NewValidator(doc, config.WithoutOpenAPIMode())
	if len(errs) > 0 {
		return nil, fmt.Errorf("adyenfake: build the checkout validator: %v", errs)
	}
	wdoc, err := libopenapi.NewDocument(openapi.Webhooks)
	if err != nil {
		return nil, fmt.Errorf("adyenfake: parse Webhooks-v1.json: %w", err)
	}
	model, err := wdoc.BuildV3Model()
	if err != nil {
		return nil, fmt.Errorf("adyenfake: build the webhooks model: %w", err)
	}
	// Each event's webhook names its own request schema; the generic
	// NotificationRequest's additionalData does not allow hmacSignature,
	// which every signed notification carries.
	events := map[string]*base.Schema{}
	for path, item := range model.Model.Webhooks.FromOldest() {
		if item.Post == nil || item.Post.RequestBody == nil {
			continue
		}
		mt, ok := item.Post.RequestBody.Content.Get("application/json")
		if !ok || mt.Schema == nil {
			continue
		}
		sch, err := mt.Schema.BuildSchema()
		if err != nil {
			return nil, fmt.Errorf("adyenfake: build the %s notification schema: %w", path, err)
		}
		events[strings.TrimPrefix(path, "/")] = sch
	}
	if len(events) == 0 {
		return nil, errors.New("adyenfake: Webhooks-v1.json defines no notifications")
	}
	return &contract{
		checkout: v,
		schemas:  schema_validation.NewSchemaValidator(config.WithFormatAssertions()),
		events:   events,
	}, nil
}

// checkRequest checks r, whose body is body, against the Checkout API. It
// returns what is wrong, or nil.
func (c *contract) checkRequest(r *http.Request, body []byte) []string {
	rr := r.Clone(r.Context())
	rr.Body = io.NopCloser(bytes.NewReader(body))
	c.mu.Lock()
	ok, errs := c.checkout.ValidateHttpRequestSync(rr)
	c.mu.Unlock()
	if ok {
		return nil
	}
	return describe(errs)
}

// checkResponse checks the answer (code, body) to r against the Checkout
// API. It returns what is wrong, or nil.
func (c *contract) checkResponse(r *http.Request, reqBody []byte, code int, header http.Header, body []byte) []string {
	rr := r.Clone(r.Context())
	rr.Body = io.NopCloser(bytes.NewReader(reqBody))
	resp := &http.Response{
		StatusCode: code,
		Header:     header.Clone(),
		Body:       io.NopCloser(bytes.NewReader(body)),
		Request:    rr,
	}
	c.mu.Lock()
	ok, errs := c.checkout.ValidateHttpResponse(rr, resp)
	c.mu.Unlock()
	if ok {
		return nil
	}
	return describe(errs)
}

// checkNotification checks a notification's body against the request
// schema of its event's webhook in Webhooks-v1.json.
func (c *contract) checkNotification(eventCode string, body []byte) []string {
	sch, ok := c.events[eventCode]
	if !ok {
		return []string{"Webhooks-v1.json defines no " + eventCode + " notification"}
	}
	c.mu.Lock()
	ok, errs := c.schemas.ValidateSchemaBytes(sch, body)
	c.mu.Unlock()
	if ok {
		return nil
	}
	return describe(errs)
}

// describe words validation errors, one line each, naming the field.
func describe(errs []*verrors.ValidationError) []string {
	var out []string
	for _, e := range errs {
		if len(e.SchemaValidationErrors) == 0 {
			out = append(out, e.Message+": "+e.Reason)
			continue
		}
		for _, f := range e.SchemaValidationErrors {
			field := f.FieldPath
			if field == "" {
				field = strings.Join(f.InstancePath, ".")
			}
			out = append(out, fmt.Sprintf("%s: %s", field, f.Reason))
		}
	}
	return out
}
