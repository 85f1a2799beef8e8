package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"
)

const reviewUsage = `Usage: afloat review <command> [flags] [ID]

Work the human review queue through a gateway's admin API.

Commands:
  list                     the items, oldest first: --status, --task, --limit, --cursor
  show ID                  one item: its input, the attempts and their errors, its answer
  claim ID                 take the item (another operator's claim answers 409)
  resolve ID               answer it: --result JSON or --result-file PATH, checked against
                           the task's schema (the gateway lists what does not fit)
  reject ID --reason TEXT  close it without an answer
  release ID               give a claim back: the item is pending again (your own claim,
                           or any with the admin token)

Flags of every command:
  --target URL        the gateway (default $AFLOAT_TARGET, else http://127.0.0.1:8080)
  --admin-token T     the admin token, or an operator's own token (default $AFLOAT_ADMIN_TOKEN)
  --operator NAME     who the admin token acts for (default $AFLOAT_OPERATOR, else "admin");
                      an operator's token acts as its operator
  --json              print the gateway's JSON as it is
  --timeout 30s       how long to wait for the gateway
`

// reviewOptions are the flags of afloat review.
type reviewOptions struct {
	target, token, operator string
	json                    bool
	status, task, cursor    string
	limit                   int
	result, resultFile      string
	reason                  string
	timeout                 time.Duration
}

// reviewCmd runs afloat review list|show|claim|resolve|reject|release against a gateway's
// admin API.
func reviewCmd(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, reviewUsage)
		return errUsage
	}
	cmd := args[0]
	switch cmd {
	case "list", "show", "claim", "resolve", "reject", "release":
	default:
		fmt.Fprintf(stderr, "afloat review: unknown command %q\n\n%s", cmd, reviewUsage)
		return errUsage
	}
	var o reviewOptions
	fs := flag.NewFlagSet("review "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, reviewUsage) }
	fs.StringVar(&o.target, "target", envOr("AFLOAT_TARGET", "http://127.0.0.1:8080"), "the gateway's URL")
	fs.StringVar(&o.token, "admin-token", os.Getenv("AFLOAT_ADMIN_TOKEN"), "the admin token or an operator's token")
	fs.StringVar(&o.operator, "operator", os.Getenv("AFLOAT_OPERATOR"), `who the admin token acts for (default "admin")`)
	fs.BoolVar(&o.json, "json", false, "print the gateway's JSON")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "how long to wait for the gateway")
	switch cmd {
	case "list":
		fs.StringVar(&o.status, "status", "", "pending, claimed, resolved or rejected (default all)")
		fs.StringVar(&o.task, "task", "", "only this task's items")
		fs.IntVar(&o.limit, "limit", 0, "items per page, 1-500 (default 50)")
		fs.StringVar(&o.cursor, "cursor", "", "the next page, as the last list printed it")
	case "resolve":
		fs.StringVar(&o.result, "result", "", "the answer, as JSON")
		fs.StringVar(&o.resultFile, "result-file", "", "a file holding the answer, as JSON")
	case "reject":
		fs.StringVar(&o.reason, "reason", "", "why the item gets no answer")
	}
	pos, err := parseInterleaved(fs, args[1:])
	if err != nil {
		return errUsage
	}
	usage := func(format string, a ...any) error {
		fmt.Fprintf(stderr, "afloat review %s: %s\n\n%s", cmd, fmt.Sprintf(format, a...), reviewUsage)
		return errUsage
	}
	var id string
	switch {
	case cmd == "list" && len(pos) > 0:
		return usage("takes no argument, got %q", pos)
	case cmd != "list" && len(pos) != 1:
		return usage("takes one review id (rv_…), got %d arguments", len(pos))
	case cmd != "list":
		id = pos[0]
	}
	if o.token == "" {
		return usage("no token: pass --admin-token or set AFLOAT_ADMIN_TOKEN")
	}
	base, err := url.Parse(strings.TrimRight(o.target, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return usage("--target %q: want http://host:port", o.target)
	}

	var (
		method = http.MethodGet
		path   = "/admin/reviews"
		body   []byte
	)
	switch cmd {
	case "list":
		q := url.Values{}
		for k, v := range map[string]string{"status": o.status, "task": o.task, "cursor": o.cursor} {
			if v != "" {
				q.Set(k, v)
			}
		}
		if o.limit != 0 {
			q.Set("limit", fmt.Sprint(o.limit))
		}
		if len(q) > 0 {
			path += "?" + q.Encode()
		}
	case "show":
		path += "/" + url.PathEscape(id)
	case "claim", "release":
		method, path = http.MethodPost, path+"/"+url.PathEscape(id)+"/"+cmd
	case "resolve":
		result, err := readResult(o)
		if err != nil {
			return usage("%v", err)
		}
		body, _ = json.Marshal(map[string]json.RawMessage{"result": result})
		method, path = http.MethodPost, path+"/"+url.PathEscape(id)+"/resolve"
	case "reject":
		if strings.TrimSpace(o.reason) == "" {
			return usage("--reason is required: say why the item gets no answer")
		}
		body, _ = json.Marshal(map[string]string{"reason": o.reason})
		method, path = http.MethodPost, path+"/"+url.PathEscape(id)+"/reject"
	}

	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	status, payload, err := callAdmin(ctx, method, base.String()+path, o, body)
	if err != nil {
		fmt.Fprintf(stderr, "afloat review %s: %v\n", cmd, err)
		return errFailed
	}
	if status/100 != 2 {
		printRefusal(stderr, cmd, id, status, payload)
		return errFailed
	}
	if o.json {
		_, err := stdout.Write(payload)
		return err
	}
	switch cmd {
	case "list":
		return printList(stdout, payload)
	default:
		return printItem(stdout, cmd, payload)
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// parseInterleaved parses flags placed before and after the positional arguments
// ("show rv_1 --json" as well as "show --json rv_1").
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// readResult returns the answer of resolve, from --result or --result-file, checked to be
// JSON (the gateway checks it against the schema).
func readResult(o reviewOptions) (json.RawMessage, error) {
	var raw []byte
	switch {
	case o.result != "" && o.resultFile != "":
		return nil, errors.New("give the answer once: --result or --result-file, not both")
	case o.result != "":
		raw = []byte(o.result)
	case o.resultFile != "":
		b, err := os.ReadFile(o.resultFile)
		if err != nil {
			return nil, err
		}
		raw = b
	default:
		return nil, errors.New("no answer: pass --result JSON or --result-file PATH")
	}
	raw = bytes.TrimSpace(raw)
	if !json.Valid(raw) {
		return nil, errors.New("the answer is not valid JSON")
	}
	return raw, nil
}

func callAdmin(ctx context.Context, method, u string, o reviewOptions, body []byte) (int, []byte, error) {
	var extra http.Header
	if o.operator != "" {
		extra = http.Header{"X-Afloat-Operator": {o.operator}}
	}
	return adminRequest(ctx, method, u, o.token, body, "application/json", extra)
}

// adminRequest makes one call to a gateway's admin API, with token as the bearer, the extra
// headers, and body (of contentType) when it is not nil; it returns the status and the
// answer, at most 16 MiB of it.
func adminRequest(ctx context.Context, method, u, token string, body []byte, contentType string, extra http.Header) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, nil, err
	}
	for k, vs := range extra {
		req.Header[k] = vs
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("cannot reach the gateway: %w", err)
	}
	defer resp.Body.Close()
	payload, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return 0, nil, fmt.Errorf("reading the gateway's answer: %w", err)
	}
	return resp.StatusCode, payload, nil
}

// printRefusal explains an error answer: its status, code, message and, for an answer off
// the schema, each validation error.
func printRefusal(w io.Writer, cmd, id string, status int, payload []byte) {
	var e struct {
		Error struct {
			Code    string   `json:"code"`
			Message string   `json:"message"`
			Details []string `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal(payload, &e) != nil || e.Error.Code == "" {
		fmt.Fprintf(w, "afloat review %s: the gateway answered %d: %s\n", cmd, status, strings.TrimSpace(string(payload)))
		return
	}
	fmt.Fprintf(w, "afloat review %s: refused (%d %s): %s\n", cmd, status, e.Error.Code, e.Error.Message)
	for _, d := range e.Error.Details {
		fmt.Fprintf(w, "  %s\n", d)
	}
	switch status {
	case http.StatusUnauthorized:
		fmt.Fprintln(w, "  check --admin-token (or AFLOAT_ADMIN_TOKEN): the admin token or an operator's token")
	case http.StatusForbidden:
		if e.Error.Code == "operator_mismatch" {
			fmt.Fprintln(w, "  an operator's token acts as its operator: drop --operator (and AFLOAT_OPERATOR)")
		}
	case http.StatusBadRequest:
		if e.Error.Code == "invalid_result" {
			fmt.Fprintf(w, "  the item is unchanged; fix the answer and run resolve %s again\n", id)
		}
	}
}

// cliItem is the part of an item the CLI prints.
type cliItem struct {
	ID             string            `json:"id"`
	Task           string            `json:"task"`
	Tenant         string            `json:"tenant"`
	Status         string            `json:"status"`
	CreatedAt      time.Time         `json:"created_at"`
	Operator       *string           `json:"operator"`
	ClaimExpiresAt *time.Time        `json:"claim_expires_at"`
	ResolvedAt     *time.Time        `json:"resolved_at"`
	Result         json.RawMessage   `json:"result"`
	Reason         *string           `json:"reason"`
	Input          json.RawMessage   `json:"input"`
	Attempts       []json.RawMessage `json:"attempts"`
	PromptVersions []string          `json:"prompt_versions"`
}

func printList(w io.Writer, payload []byte) error {
	var page struct {
		Items      []cliItem `json:"items"`
		NextCursor *string   `json:"next_cursor"`
	}
	if err := json.Unmarshal(payload, &page); err != nil {
		return fmt.Errorf("the gateway's list: %w", err)
	}
	if len(page.Items) == 0 {
		fmt.Fprintln(w, "no review items")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTASK\tTENANT\tSTATUS\tQUEUED\tOPERATOR")
	for _, it := range page.Items {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", it.ID, it.Task, orDash(it.Tenant), it.Status,
			it.CreatedAt.UTC().Format(time.RFC3339), orDash(deref(it.Operator)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if page.NextCursor != nil {
		fmt.Fprintf(w, "more: afloat review list --cursor %s\n", *page.NextCursor)
	}
	return nil
}

func printItem(w io.Writer, cmd string, payload []byte) error {
	var it cliItem
	if err := json.Unmarshal(payload, &it); err != nil {
		return fmt.Errorf("the gateway's item: %w", err)
	}
	switch cmd {
	case "claim":
		line := fmt.Sprintf("%s claimed by %s", it.ID, deref(it.Operator))
		if it.ClaimExpiresAt != nil {
			line += " until " + it.ClaimExpiresAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintln(w, line)
		return nil
	case "resolve":
		fmt.Fprintf(w, "%s resolved by %s: %s\n", it.ID, deref(it.Operator), it.Result)
		return nil
	case "reject":
		fmt.Fprintf(w, "%s rejected by %s: %s\n", it.ID, deref(it.Operator), deref(it.Reason))
		return nil
	case "release":
		fmt.Fprintf(w, "%s released: %s\n", it.ID, it.Status)
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	row("id", it.ID)
	row("task", it.Task)
	row("tenant", orDash(it.Tenant))
	row("status", it.Status)
	row("queued", it.CreatedAt.UTC().Format(time.RFC3339))
	row("operator", orDash(deref(it.Operator)))
	if it.ClaimExpiresAt != nil {
		row("claim until", it.ClaimExpiresAt.UTC().Format(time.RFC3339))
	}
	if it.ResolvedAt != nil {
		row("answered", it.ResolvedAt.UTC().Format(time.RFC3339))
	}
	row("prompts tried", orDash(strings.Join(it.PromptVersions, ", ")))
	row("input", string(it.Input))
	for i, a := range it.Attempts {
		row(fmt.Sprintf("attempt %d", i+1), string(a))
	}
	if it.Status == "resolved" {
		row("result", string(it.Result))
	}
	if it.Reason != nil {
		row("reason", *it.Reason)
	}
	return tw.Flush()
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
