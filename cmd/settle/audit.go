package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/settlepay/settle/internal/audit"
)

// auditFlags are the settings of the gateway audit, which audit and
// reconcile bind.
var auditFlags = []string{"no-show-horizon", "audit-window", "audit-margin"}

// auditor returns the gateway audit of the app's gateway accounts,
// counting what it finds in the metrics.
func (a *app) auditor() (*audit.Auditor, error) {
	return audit.New(a.store, a.gateways, audit.Config{
		NoShowHorizon: a.cfg.NoShowHorizon,
		Margin:        a.cfg.AuditMargin,
		Observe: func(r audit.Run, found []audit.Found) {
			var classes []string
			for _, f := range found {
				if f.New {
					classes = append(classes, string(f.Class))
				}
			}
			a.metrics.AuditFound(r.Gateway, classes)
		},
		Finished: func(r audit.Run) {
			result := "findings"
			switch {
			case !r.Covered:
				result = "not_covered"
			case r.Clean():
				result = "clean"
			}
			a.metrics.AuditRun(r.Gateway, result)
		},
	}, a.log)
}

// auditScheduler returns the scheduled audit of settle reconcile, nil when
// audit-interval is 0.
func (a *app) auditScheduler() (*audit.Scheduler, error) {
	if a.cfg.AuditInterval == 0 {
		return nil, nil
	}
	au, err := a.auditor()
	if err != nil {
		return nil, err
	}
	return audit.NewScheduler(au, audit.Schedule{Merchants: a.cfg.AuditMerchants, Window: a.cfg.AuditWindow,
		Interval: a.cfg.AuditInterval, Actor: "reconcile"})
}

// auditRunFlags registers settle audit's own flags, beside the options of
// its configuration: the merchant, the gateway account, the window and the
// actor.
func auditRunFlags(fs *flag.FlagSet) (merchant, gateway, from, to, actor *string) {
	merchant = fs.String("merchant", "default", "the merchant audited")
	gateway = fs.String("gateway", "", "the gateway account audited (required)")
	from = fs.String("from", "", "start of the window (RFC 3339), with -to")
	to = fs.String("to", "", "end of the window (RFC 3339, excluded), with -from")
	actor = fs.String("actor", "settle-audit", "who the run is recorded as started by")
	return merchant, gateway, from, to, actor
}

// runAudit audits one merchant's gateway account over one window, on
// demand, and prints the run and its findings. Without -from and -to the
// window is the latest closed audit-window.
func runAudit(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("settle audit", flag.ContinueOnError)
	fs.SetOutput(stderr)
	load := bindConfig(fs, getenv, nil, commandOptions["audit"]...)
	merchant, gateway, from, to, actor := auditRunFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := load()
	if err == nil {
		err = cfg.validate()
	}
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	if *gateway == "" {
		return errors.New("usage: settle audit -gateway <account> [-merchant m] [-from t -to t]")
	}
	log := cfg.logger(stderr)
	a, err := newApp(ctx, cfg, log, "refpsp", nil, getenv)
	if err != nil {
		return err
	}
	defer a.close()
	au, err := a.auditor()
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	var w audit.Window
	switch {
	case *from == "" && *to == "":
		end := au.ClosedBy(time.Now()).Truncate(cfg.AuditWindow)
		w = audit.Window{From: end.Add(-cfg.AuditWindow), To: end}
	case *from == "" || *to == "":
		return errors.New("-from and -to go together")
	default:
		if w.From, err = time.Parse(time.RFC3339Nano, *from); err != nil {
			return fmt.Errorf("-from: %w", err)
		}
		if w.To, err = time.Parse(time.RFC3339Nano, *to); err != nil {
			return fmt.Errorf("-to: %w", err)
		}
	}
	if err := a.waitForDatabase(ctx); err != nil {
		return err
	}
	r, err := au.Audit(ctx, *merchant, *gateway, w, *actor)
	if err != nil {
		return err
	}
	return printRun(ctx, stdout, a, r)
}

// printRun prints a run and the findings it saw, a line each.
func printRun(ctx context.Context, w io.Writer, a *app, r audit.Run) error {
	fmt.Fprintf(w, "run %s: merchant %s, gateway %s, window [%s, %s), %d records matched\n", r.ID, r.MerchantID, r.Gateway,
		r.Window.From.UTC().Format(time.RFC3339), r.Window.To.UTC().Format(time.RFC3339), r.Seen)
	switch {
	case !r.Covered:
		fmt.Fprintf(w, "not covered: %s\n", r.NotCovered)
		return nil
	case r.Clean():
		fmt.Fprintln(w, "clean: no finding")
		return nil
	}
	for _, c := range audit.Classes {
		if n := r.Counts[c]; n > 0 {
			fmt.Fprintf(w, "%s: %d\n", c, n)
		}
	}
	fs, err := a.store.Findings(ctx, r.MerchantID, r.ID)
	if err != nil {
		return err
	}
	for _, f := range fs {
		fmt.Fprintf(w, "finding %s %s order=%s attempt=%s gateway_record=%s settle=%s gateway=%s\n", f.ID, f.Class, f.OrderID,
			f.AttemptID, f.GatewayRecordID, f.Settle, f.GatewayRecord)
	}
	return nil
}
