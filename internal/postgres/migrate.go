package postgres

import (
	"context"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/settlepay/settle/migrations"
)

func provider(pool *pgxpool.Pool) (*goose.Provider, error) {
	p, err := goose.NewProvider(goose.DialectPostgres, stdlib.OpenDBFromPool(pool), migrations.FS)
	if err != nil {
		return nil, fmt.Errorf("load migrations: %w", err)
	}
	return p, nil
}

// Migrate applies every pending migration.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	p, err := provider(pool)
	if err != nil {
		return err
	}
	defer p.Close()
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrate up: %w", err)
	}
	return nil
}

// ErrBehind means the database lacks migrations this binary needs.
var ErrBehind = fmt.Errorf("the database schema is behind this binary: run `settle migrate up`")

// CheckMigrated returns ErrBehind when migrations are pending.
func CheckMigrated(ctx context.Context, pool *pgxpool.Pool) error {
	p, err := provider(pool)
	if err != nil {
		return err
	}
	defer p.Close()
	pending, err := p.HasPending(ctx)
	if err != nil {
		return fmt.Errorf("check migrations: %w", err)
	}
	if pending {
		return ErrBehind
	}
	return nil
}

// PrintStatus writes one line per migration: applied or pending.
func PrintStatus(ctx context.Context, pool *pgxpool.Pool, w io.Writer) error {
	p, err := provider(pool)
	if err != nil {
		return err
	}
	defer p.Close()
	st, err := p.Status(ctx)
	if err != nil {
		return fmt.Errorf("migration status: %w", err)
	}
	for _, m := range st {
		applied := "pending"
		if m.State == goose.StateApplied {
			applied = "applied " + m.AppliedAt.UTC().Format("2006-01-02 15:04:05Z")
		}
		fmt.Fprintf(w, "%05d  %-32s %s\n", m.Source.Version, m.Source.Path, applied)
	}
	return nil
}
