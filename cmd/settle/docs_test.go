package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// recipeDocs are the documents whose recipes TestDocRecipes runs, each
// against its own settle dev.
// docs/card-numbers.md has no shell recipe (its one command is a go test
// line, in a plain fence); docs/contributing.md's are all norun.
var recipeDocs = []string{"../../README.md", "../../docs/api.md", "../../docs/operations.md", "../../docs/contributing.md"}

// A recipe is a fenced block of a document. The convention, which
// docs/contributing.md states for writers:
//
//   - ```sh: run by bash, in the document's order, in one shell session
//     per document, against a settle dev of its own; variables carry from
//     block to block.
//   - ```sh dev: the command that starts settle dev; not run, but the
//     test starts settle dev with the flags it gives.
//   - ```sh norun <reason>: not run (the reason is required); counted.
//   - a comment ending in "=> text" (as "# => text" or "# why => text"):
//     the block's output (stdout and stderr) must contain text, after what
//     the block's previous annotation matched; "=~ regexp" likewise with a
//     regular expression. Every run block has one.
type recipe struct {
	line   int    // of the opening fence, for messages
	kind   string // "run", "dev" or "norun"
	reason string // of a norun block
	body   string
	checks []check
}

type check struct {
	re   *regexp.Regexp
	text string // as written, for messages
}

var annotation = regexp.MustCompile(`#[^#]*?\s=([>~])\s+(.+?)\s*$`)

// parseRecipes returns the sh blocks of a Markdown document.
func parseRecipes(doc string) ([]recipe, error) {
	var out []recipe
	var cur *recipe
	var body strings.Builder
	sc := bufio.NewScanner(strings.NewReader(doc))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if cur == nil {
			info, ok := strings.CutPrefix(trimmed, "```sh")
			if !ok || (info != "" && info[0] != ' ') {
				continue
			}
			fields := strings.Fields(info)
			cur = &recipe{line: n, kind: "run"}
			if len(fields) > 0 {
				switch fields[0] {
				case "dev":
					cur.kind = "dev"
				case "norun":
					cur.kind, cur.reason = "norun", strings.Join(fields[1:], " ")
					if cur.reason == "" {
						return nil, fmt.Errorf("line %d: a norun block needs a reason", n)
					}
				default:
					return nil, fmt.Errorf("line %d: unknown sh block kind %q (want dev or norun <reason>)", n, fields[0])
				}
			}
			body.Reset()
			continue
		}
		if trimmed == "```" {
			cur.body = body.String()
			out = append(out, *cur)
			cur = nil
			continue
		}
		// Indented fences (in a list) are indented in full.
		body.WriteString(strings.TrimPrefix(line, "  ") + "\n")
		if m := annotation.FindStringSubmatch(line); m != nil {
			pattern := regexp.QuoteMeta(m[2])
			if m[1] == "~" {
				pattern = m[2]
			}
			re, err := regexp.Compile(pattern)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			cur.checks = append(cur.checks, check{re: re, text: m[2]})
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("line %d: the sh block is not closed", cur.line)
	}
	return out, nil
}

// devFlags are the flags after "settle dev" in a document's dev block.
func devFlags(recipes []recipe) []string {
	for _, r := range recipes {
		if r.kind == "dev" {
			_, after, _ := strings.Cut(r.body, "./cmd/settle dev")
			line, _, _ := strings.Cut(after, "\n")
			line, _, _ = strings.Cut(line, "#")
			return strings.Fields(line)
		}
	}
	return nil
}

// TestDocRecipes runs every recipe of recipeDocs against
// settle dev and checks what they print, so that the docs cannot drift
// from what Settle does.
func TestDocRecipes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds grpcurl and runs settle dev for each document; skipped with -short")
	}
	// Beside the other parallel tests rather than after them: the package
	// runs for minutes under -race already.
	t.Parallel()
	for _, tool := range []string{"bash", "jq", "curl", "openssl", "psql"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("the docs' recipes need %s: install it (apt-get install -y %s)", tool, tool)
			}
			t.Skipf("the docs' recipes need %s, which is not installed", tool)
		}
	}
	bin := t.TempDir()
	// grpcurl as pinned in tools/go.mod; GOFLAGS of the test's caller (a
	// -mod for the main module, say) would not fit the tools module.
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "grpcurl"), "github.com/fullstorydev/grpcurl/cmd/grpcurl")
	build.Dir = "../../tools"
	build.Env = append(os.Environ(), "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build grpcurl from tools/go.mod: %v\n%s", err, out)
	}
	// settle itself (settle config, settle migrate status) is this test
	// binary, as in TestMain.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	wrapper := fmt.Sprintf("#!/bin/sh\nSETTLE_TEST_AS_MAIN=1 exec '%s' \"$@\"\n", self)
	if err := os.WriteFile(filepath.Join(bin, "settle"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, path := range recipeDocs {
		t.Run(filepath.Base(path), func(t *testing.T) {
			t.Parallel()
			doc, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			recipes, err := parseRecipes(string(doc))
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			runRecipes(t, path, bin, recipes)
		})
	}
}

func runRecipes(t *testing.T, path, bin string, recipes []recipe) {
	norun, runs := map[string]int{}, 0
	for _, r := range recipes {
		switch r.kind {
		case "norun":
			norun[r.reason]++
		case "run":
			runs++
		}
	}
	if runs == 0 {
		// No settle dev for a document whose commands are none to run.
		t.Logf("%s: 0 recipes run, %d not run: %v", path, len(recipes), norun)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	addr, jsonAddr, webhookAddr, eventsAddr, simAddr, sim2Addr := freeAddr(t), freeAddr(t), freeAddr(t), freeAddr(t), freeAddr(t), freeAddr(t)
	args := append([]string{"dev"}, devFlags(recipes)...)
	args = append(args, "--listen", addr, "--json-listen", jsonAddr, "--console-listen", "127.0.0.1:0", "--sim-addr", simAddr, "--sim2-addr", sim2Addr,
		"--event-receiver-addr", eventsAddr, "--webhook-listen", webhookAddr)
	var out lockedBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, mapEnv(nil), &out, &out) }()
	defer func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("settle %v: %v", args, err)
		}
	}()
	for !strings.Contains(out.String(), "Settle is running") {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("settle %v ended before its banner: %v\n%s", args, err, out.String())
		case <-ctx.Done():
			t.Fatalf("settle %v: no banner:\n%s", args, out.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	banner := out.String()
	env := []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + t.TempDir(), "LC_ALL=C",
		"SETTLE_ADDR=" + addr, "SETTLE_JSON_URL=http://" + jsonAddr, "SETTLE_WEBHOOK_ADDR=" + webhookAddr, "SETTLE_EVENTS_URL=http://" + eventsAddr + "/events", "SETTLE_SIM_URL=http://" + simAddr,
		"SETTLE_SIM2_URL=http://" + sim2Addr}
	// The database and the metrics listener are dev's choice; the banner
	// names them.
	for name, re := range map[string]string{"DATABASE_URL": `database:\s+(\S+)`, "SETTLE_METRICS_ADDR": `metrics:\s+http://([^/\s]+)/metrics`} {
		m := regexp.MustCompile(re).FindStringSubmatch(banner)
		if m == nil {
			t.Fatalf("settle dev's banner names no %s (%s):\n%s", name, re, banner)
		}
		env = append(env, name+"="+m[1])
	}
	for _, name := range []string{"SETTLE_KEY", "SETTLE_OPS_KEY", "SETTLE_REFPSP_WEBHOOK_SECRET"} {
		m := regexp.MustCompile(`export ` + name + `=(\S+)`).FindStringSubmatch(banner)
		if m == nil {
			t.Fatalf("settle dev's banner exports no %s:\n%s", name, banner)
		}
		env = append(env, name+"="+m[1])
	}

	// One script, one shell: each block's output goes to its own file.
	dir := t.TempDir()
	var script strings.Builder
	var ran []int
	for i, r := range recipes {
		if r.kind != "run" {
			continue
		}
		if len(r.checks) == 0 {
			t.Errorf("%s:%d: the block has no annotation (# => text): what it prints is checked by nothing", path, r.line)
		}
		ran = append(ran, i)
		fmt.Fprintf(&script, "{\n%s\n} >%s 2>&1 </dev/null\n", r.body, filepath.Join(dir, fmt.Sprint(i)))
	}
	sh := exec.CommandContext(ctx, "bash", "--noprofile", "--norc")
	sh.Env, sh.Dir, sh.Stdin = env, t.TempDir(), strings.NewReader(script.String())
	shOut, shErr := sh.CombinedOutput()
	if shErr != nil {
		t.Errorf("%s: bash: %v\n%s", path, shErr, shOut)
	}
	for _, i := range ran {
		r := recipes[i]
		got, err := os.ReadFile(filepath.Join(dir, fmt.Sprint(i)))
		if err != nil {
			t.Errorf("%s:%d: the block did not run (an earlier one ended the shell?)", path, r.line)
			continue
		}
		rest := string(got)
		for _, c := range r.checks {
			loc := c.re.FindStringIndex(rest)
			if loc == nil {
				t.Errorf("%s:%d: the block's output has no %q (after the previous annotation's match):\n%s\noutput:\n%s", path, r.line, c.text, r.body, got)
				break
			}
			rest = rest[loc[1]:]
		}
	}
	t.Logf("%s: %d recipes run, %d not run: %v", path, len(ran), len(recipes)-len(ran), norun)
	if t.Failed() {
		t.Logf("settle dev's output:\n%s", out.String())
	}
}

// TestDocRecipeConvention: what parseRecipes makes of each kind of block,
// and the mistakes it refuses rather than skipping a recipe unseen.
func TestDocRecipeConvention(t *testing.T) {
	doc := "text\n```sh dev\ngo run ./cmd/settle dev -sim-events-loss 1   # why\n```\n" +
		"```sh\necho PAID   # the state => PAID\necho 42   # =~ ^4\\d$\n```\n" +
		"- a list:\n  ```sh norun needs Stripe\n  echo no\n  ```\n```go\nfmt.Println()\n```\n"
	recipes, err := parseRecipes(doc)
	if err != nil {
		t.Fatal(err)
	}
	if len(recipes) != 3 || recipes[0].kind != "dev" || recipes[1].kind != "run" || recipes[2].kind != "norun" || recipes[2].reason != "needs Stripe" {
		t.Fatalf("recipes = %+v, want dev, run, norun", recipes)
	}
	if got := devFlags(recipes); strings.Join(got, " ") != "-sim-events-loss 1" {
		t.Errorf("dev flags = %q", got)
	}
	if c := recipes[1].checks; len(c) != 2 || c[0].text != "PAID" || !c[1].re.MatchString("42") || c[1].re.MatchString("4x") {
		t.Errorf("checks = %+v, want PAID and a regexp", c)
	}
	for _, bad := range []string{"```sh norun\necho\n```\n", "```sh nrun x\necho\n```\n", "```sh\necho\n"} {
		if _, err := parseRecipes(bad); err == nil {
			t.Errorf("parseRecipes(%q): no error", bad)
		}
	}
	// A document with shell recipes that recipeDocs does not list would
	// drift unseen.
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range append(docs, "../../README.md") {
		doc, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		recipes, err := parseRecipes(string(doc))
		if err != nil {
			t.Errorf("%s: %v", path, err)
		}
		if len(recipes) > 0 && !slices.Contains(recipeDocs, path) {
			t.Errorf("%s has %d sh blocks but is not in recipeDocs: TestDocRecipes would not run them", path, len(recipes))
		}
	}
}
