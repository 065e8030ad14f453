// Package settle holds what the repository root gives the binary: the
// OpenAPI document of the JSON over HTTP API, which buf generate writes
// into gen/openapi (a folder regenerated whole, so nothing hand-written
// may live there).
package settle

import _ "embed"

// OpenAPI is the OpenAPI (Swagger 2.0) document of OrderService's and
// OpsService's JSON over HTTP paths, as generated from proto/settle/v1.
//
//go:embed gen/openapi/settle.swagger.json
var OpenAPI []byte
