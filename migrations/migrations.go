// Package migrations holds Settle's database schema as numbered goose SQL
// files, embedded so that the binary can migrate the database it serves.
package migrations

import "embed"

// FS holds the migration files.
//
//go:embed *.sql
var FS embed.FS
