package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

const flagsUsage = `Usage: afloat flags <command> [flags] [PATCH]

Read and change a gateway's kill switches, blocklists and rollouts (PATCH /admin/flags).

Commands:
  get                      the flags in force (with --task, that task's)
  set PATCH                merge a JSON Merge Patch into the flags (with --task, into that
                           task's): null puts a key back to the config's value
  set --rollout N          with --task: the share of tenants (0-100) the task is on for
  set --blocklist a,b      with --task: the tenants it is off for ("" clears the list)
  kill                     turn every task and route off (with --task, that one)
  unkill                   turn them back on (with --task, that one)

Flags of every command:
  --target URL        the gateway (default $AFLOAT_TARGET, else http://127.0.0.1:8080)
  --admin-token T     the admin token (default $AFLOAT_ADMIN_TOKEN)
  --task NAME         a task or route of the gateway's config
  --timeout 30s       how long to wait for the gateway
`

// flagsOptions are the flags of afloat flags.
type flagsOptions struct {
	target, token, task string
	rollout             int
	blocklist           string
	timeout             time.Duration
}

// flagsCmd runs afloat flags get|set|kill|unkill against a gateway's admin API and prints
// the flags in force after it.
func flagsCmd(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, flagsUsage)
		return errUsage
	}
	cmd := args[0]
	switch cmd {
	case "get", "set", "kill", "unkill":
	default:
		fmt.Fprintf(stderr, "afloat flags: unknown command %q\n\n%s", cmd, flagsUsage)
		return errUsage
	}
	var o flagsOptions
	fs := flag.NewFlagSet("flags "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, flagsUsage) }
	fs.StringVar(&o.target, "target", envOr("AFLOAT_TARGET", "http://127.0.0.1:8080"), "the gateway's URL")
	fs.StringVar(&o.token, "admin-token", os.Getenv("AFLOAT_ADMIN_TOKEN"), "the admin token")
	fs.StringVar(&o.task, "task", "", "a task or route")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "how long to wait for the gateway")
	if cmd == "set" {
		fs.IntVar(&o.rollout, "rollout", 0, "the task's rollout, 0-100")
		fs.StringVar(&o.blocklist, "blocklist", "", "the tenants the task is off for, comma-separated")
	}
	pos, err := parseInterleaved(fs, args[1:])
	if err != nil {
		return errUsage
	}
	usage := func(format string, a ...any) error {
		fmt.Fprintf(stderr, "afloat flags %s: %s\n", cmd, fmt.Sprintf(format, a...))
		return errUsage
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })

	var patch []byte
	switch cmd {
	case "get":
		if len(pos) > 0 {
			return usage("takes no argument, got %q", pos)
		}
	case "kill", "unkill":
		if len(pos) > 0 {
			return usage("takes no argument, got %q", pos)
		}
		patch = scoped(o.task, map[string]any{"kill": cmd == "kill"})
	case "set":
		byFlags := given["rollout"] || given["blocklist"]
		switch {
		case len(pos) > 1:
			return usage("takes one JSON merge patch, got %d arguments", len(pos))
		case len(pos) == 1 && byFlags:
			return usage("give the change once: a JSON merge patch or --rollout/--blocklist, not both")
		case len(pos) == 1:
			raw := []byte(strings.TrimSpace(pos[0]))
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
				return usage("the patch is not a JSON object: %s", pos[0])
			}
			if o.task == "" {
				patch = raw
			} else {
				patch = scoped(o.task, json.RawMessage(raw))
			}
		case !byFlags:
			return usage("nothing to set: pass a JSON merge patch, or --task with --rollout N or --blocklist a,b")
		case o.task == "":
			return usage("--rollout and --blocklist are a task's: pass --task NAME")
		default:
			tf := map[string]any{}
			if given["rollout"] {
				if o.rollout < 0 || o.rollout > 100 {
					return usage("--rollout %d: want 0 to 100", o.rollout)
				}
				tf["rollout_pct"] = o.rollout
			}
			if given["blocklist"] {
				list := []string{}
				for _, t := range strings.Split(o.blocklist, ",") {
					if t = strings.TrimSpace(t); t != "" {
						list = append(list, t)
					}
				}
				tf["blocklist"] = list
			}
			patch = scoped(o.task, tf)
		}
	}
	if o.token == "" {
		return usage("no token: pass --admin-token or set AFLOAT_ADMIN_TOKEN")
	}
	base, err := url.Parse(strings.TrimRight(o.target, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return usage("--target %q: want http://host:port", o.target)
	}

	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	method := http.MethodGet
	if patch != nil {
		method = http.MethodPatch
	}
	status, payload, err := callFlags(ctx, method, base.String()+"/admin/flags", o.token, patch)
	if err != nil {
		fmt.Fprintf(stderr, "afloat flags %s: %v\n", cmd, err)
		return errFailed
	}
	if status/100 != 2 {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if json.Unmarshal(payload, &e) == nil && e.Error.Code != "" {
			fmt.Fprintf(stderr, "afloat flags %s: refused (%d %s): %s\n", cmd, status, e.Error.Code, e.Error.Message)
		} else {
			fmt.Fprintf(stderr, "afloat flags %s: the gateway answered %d: %s\n", cmd, status, bytes.TrimSpace(payload))
		}
		if status == http.StatusUnauthorized {
			fmt.Fprintln(stderr, "  check --admin-token (or AFLOAT_ADMIN_TOKEN)")
		}
		return errFailed
	}
	return printFlags(stdout, o.task, payload)
}

// scoped puts v at the top of the patch, or under tasks.<task> with a task.
func scoped(task string, v any) []byte {
	var p any = v
	if task != "" {
		p = map[string]any{"tasks": map[string]any{task: v}}
	}
	b, _ := json.Marshal(p)
	return b
}

func callFlags(ctx context.Context, method, u, token string, body []byte) (int, []byte, error) {
	return adminRequest(ctx, method, u, token, body, "application/merge-patch+json", nil)
}

// printFlags prints the document the gateway answered, indented; with a task, that task's
// flags and the global kill switch.
func printFlags(w io.Writer, task string, payload []byte) error {
	var doc struct {
		Kill  bool                       `json:"kill"`
		Tasks map[string]json.RawMessage `json:"tasks"`
	}
	if err := json.Unmarshal(payload, &doc); err != nil {
		return fmt.Errorf("the gateway's flags: %w", err)
	}
	var out any = json.RawMessage(payload)
	if task != "" {
		tf, ok := doc.Tasks[task]
		if !ok {
			return fmt.Errorf("the gateway has no task or route %q", task)
		}
		out = map[string]any{"kill": doc.Kill, "tasks": map[string]json.RawMessage{task: tf}}
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
