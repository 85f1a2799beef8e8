package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/afloat-dev/afloat/config"
	"github.com/afloat-dev/afloat/gateway"
	"github.com/afloat-dev/afloat/review"
)

const (
	cliAdmin  = "adm-cli-3f8a1c6e2d"
	cliAlice  = "op-alice-cli-7b2e9d4a"
	cliBob    = "op-bob-cli-1c5f8e3b"
	cliClient = "ck-acme-cli-4d9b2a7e"
)

// moderationDown is a config whose critical task's only provider always fails: every call
// queues an item.
const moderationDown = `
defaults: {retry: {max: 0}}
providers:
  down: {type: sim, error_rate: 1}
tasks:
  moderation:
    criticality: critical
    schema: schemas/mod.json
    cascade: [{provider: down, prompt: prompts/mod/a.v1.tmpl}]
`

// reviewGateway starts a gateway in process over moderationDown and queues n items through
// its task API; it returns the gateway's URL and the review ids.
func reviewGateway(t *testing.T, n int) (string, []string) {
	t.Helper()
	f, err := config.Load(writeConfig(t, moderationDown, testFiles))
	if err != nil {
		t.Fatal(err)
	}
	rt, err := f.Build(config.BuildOptions{Review: review.NewMemory(nil)})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(gateway.Config{Engine: rt.Engine, Tasks: rt.Tasks, Review: rt.Review,
		AdminToken: cliAdmin, Operators: map[string]string{"alice": cliAlice, "bob": cliBob},
		Tenants: map[string][]string{"acme": {cliClient}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw.Handler())
	t.Cleanup(srv.Close)
	var ids []string
	for range n {
		req, _ := http.NewRequest("POST", srv.URL+"/v1/tasks/moderation", strings.NewReader(`{"input": {"text": "you are all idiots"}}`))
		req.Header.Set("Authorization", "Bearer "+cliClient)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var env struct {
			ReviewID string `json:"review_id"`
		}
		err = json.NewDecoder(resp.Body).Decode(&env)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusAccepted || env.ReviewID == "" {
			t.Fatalf("moderation call: %d, %v, %+v", resp.StatusCode, err, env)
		}
		ids = append(ids, env.ReviewID)
	}
	return srv.URL, ids
}

func TestReviewCommand(t *testing.T) {
	for _, k := range []string{"AFLOAT_TARGET", "AFLOAT_ADMIN_TOKEN", "AFLOAT_OPERATOR"} {
		t.Setenv(k, "")
	}
	target, ids := reviewGateway(t, 3)
	a, b, c := ids[0], ids[1], ids[2]
	answer := filepath.Join(t.TempDir(), "answer.json")
	if err := os.WriteFile(answer, []byte(`{"allowed": false}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	as := func(token string, args ...string) []string {
		return append(args, "--target", target, "--admin-token", token)
	}
	steps := []struct {
		name   string
		args   []string
		err    error
		stdout []string // each must appear
		stderr []string
	}{
		{"list", as(cliAlice, "list"), nil, []string{"ID", "STATUS", a + "  moderation  acme    pending", b, c}, nil},
		{"list a page", as(cliAlice, "list", "--limit", "2"), nil, []string{a, b, "more: afloat review list --cursor "}, nil},
		{"show, flags after the id", append([]string{"show", a}, "--target", target, "--admin-token", cliBob), nil,
			[]string{"id:", a, `{"text":"you are all idiots"}`, `"outcome":"unavailable"`, "moderation/down/v1"}, nil},
		{"admin claims for alice", as(cliAdmin, "claim", a, "--operator", "alice"), nil, []string{a + " claimed by alice"}, nil},
		{"bob cannot claim it", as(cliBob, "claim", a), errFailed, nil, []string{"refused (409 review_conflict)", "claimed by alice"}},
		{"an answer off the schema", as(cliAlice, "resolve", a, "--result", `{"allowed": "no"}`), errFailed, nil,
			[]string{"refused (400 invalid_result)", "at /allowed", "the item is unchanged"}},
		{"resolve from a file", as(cliAlice, "resolve", a, "--result-file", answer), nil, []string{a + ` resolved by alice: {"allowed":false}`}, nil},
		{"alice claims c", as(cliAlice, "claim", c), nil, []string{c + " claimed by alice"}, nil},
		{"bob cannot release alice's claim", as(cliBob, "release", c), errFailed, nil, []string{"409"}},
		{"alice releases c", as(cliAlice, "release", c), nil, []string{c + " released: pending"}, nil},
		{"bob rejects b", as(cliBob, "reject", b, "--reason", "a test message"), nil, []string{b + " rejected by bob: a test message"}, nil},
		{"resolving the rejected b", as(cliAlice, "resolve", b, "--result", `{"allowed": true}`), errFailed, nil, []string{"409", "already rejected by bob"}},
		{"list resolved", as(cliAlice, "list", "--status", "resolved"), nil, []string{a, "alice"}, nil},
		{"unknown id", as(cliAlice, "show", "rv_nope"), errFailed, nil, []string{"404 unknown_review"}},
		{"wrong token", as("nope", "list"), errFailed, nil, []string{"401", "check --admin-token"}},
		{"alice cannot act as bob", as(cliAlice, "claim", c, "--operator", "bob"), errFailed, nil,
			[]string{"refused (403 operator_mismatch)", "drop --operator"}},
		{"the admin token alone acts as admin", as(cliAdmin, "claim", c), nil, []string{c + " claimed by admin"}, nil},
		{"no command", nil, errUsage, nil, []string{"Usage: afloat review"}},
		{"unknown command", []string{"approve"}, errUsage, nil, []string{`unknown command "approve"`}},
		{"no id", as(cliAlice, "claim"), errUsage, nil, []string{"takes one review id"}},
		{"two answers", as(cliAlice, "resolve", c, "--result", "{}", "--result-file", answer), errUsage, nil, []string{"not both"}},
		{"no answer", as(cliAlice, "resolve", c), errUsage, nil, []string{"--result JSON or --result-file"}},
		{"an answer that is not JSON", as(cliAlice, "resolve", c, "--result", "{allowed"), errUsage, nil, []string{"not valid JSON"}},
		{"a reject without a reason", as(cliAlice, "reject", c), errUsage, nil, []string{"--reason is required"}},
		{"a bad target", []string{"list", "--target", "127.0.0.1:1", "--admin-token", "x"}, errUsage, nil, []string{"--target"}},
		{"an unknown flag", as(cliAlice, "list", "--colour"), errUsage, nil, []string{"colour"}},
	}
	for _, s := range steps {
		var out, errOut bytes.Buffer
		err := reviewCmd(s.args, &out, &errOut)
		if !errors.Is(err, s.err) || (s.err == nil && err != nil) {
			t.Fatalf("%s: err %v, want %v\nstdout: %s\nstderr: %s", s.name, err, s.err, out.String(), errOut.String())
		}
		for _, want := range s.stdout {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%s: stdout lacks %q:\n%s", s.name, want, out.String())
			}
		}
		for _, want := range s.stderr {
			if !strings.Contains(errOut.String(), want) {
				t.Errorf("%s: stderr lacks %q:\n%s", s.name, want, errOut.String())
			}
		}
		if testing.Verbose() {
			t.Logf("%s:\n%s%s", s.name, out.String(), errOut.String())
		}
		for _, secret := range []string{cliAdmin, cliAlice, cliBob} {
			if strings.Contains(out.String()+errOut.String(), secret) {
				t.Errorf("%s: a token reached the output", s.name)
			}
		}
	}

	// --json prints the gateway's document, for scripts.
	var out bytes.Buffer
	if err := reviewCmd([]string{"show", a, "--json", "--target", target, "--admin-token", cliAlice}, &out, &out); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil || doc["status"] != "resolved" || doc["operator"] != "alice" {
		t.Fatalf("show --json: %v\n%s", err, out.String())
	}
}

// TestReadmeReviewCommands runs the README's review walkthrough as written, line by line,
// against afloat serve of examples/afloat.yaml in process: a command the CLI refuses, a
// variable nobody sets or a line this test cannot read fails it.
func TestReadmeReviewCommands(t *testing.T) {
	blocks := readmeBlocks(t, "## Human review")
	if len(blocks) == 0 {
		t.Fatal("the README's Human review section has no sh block")
	}
	dir := t.TempDir()
	yaml, err := os.ReadFile(exampleConfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "afloat.yaml"), yaml, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"prompts", "schemas"} {
		if err := os.CopyFS(filepath.Join(dir, sub), os.DirFS(filepath.Join(filepath.Dir(exampleConfig), sub))); err != nil {
			t.Fatal(err)
		}
	}
	const token = "adm-readme-6b1d0e9f"
	t.Setenv("AFLOAT_ADMIN_TOKEN", token)
	t.Setenv("AFLOAT_OPERATOR", "")

	pr, pw := io.Pipe()
	stderr := &syncWriter{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "-c", filepath.Join(dir, "afloat.yaml"), "-listen", "127.0.0.1:0"}, &syncWriter{w: pw}, stderr)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("serve did not stop")
		}
	})
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("serve printed nothing: %v; stderr %s", err, stderr.String())
	}
	go io.Copy(io.Discard, pr)
	base := strings.TrimSpace(strings.TrimPrefix(line, "afloat listening on "))
	t.Setenv("AFLOAT_TARGET", base) // the CLI's default target stands for http://127.0.0.1:8080

	sh := &readmeShell{t: t, base: base, vars: map[string]string{"AFLOAT_ADMIN_TOKEN": token}, ran: map[string]bool{}}
	for _, b := range blocks {
		sh.block(b)
	}
	for _, cmd := range []string{"list", "show", "claim", "resolve", "reject"} {
		if !sh.ran[cmd] {
			t.Errorf("the README never runs afloat review %s", cmd)
		}
	}
	// What the walkthrough did, as the gateway has it.
	for _, want := range []struct{ status, operator, field, value string }{
		{"resolved", "admin", "result", `{"decision":"reject","categories":["abuse"],"confidence":1}`},
		{"rejected", "alice", "reason", `"spam"`},
	} {
		var page struct {
			Items []map[string]json.RawMessage `json:"items"`
		}
		req, _ := http.NewRequest("GET", base+"/admin/reviews?status="+want.status, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil || len(page.Items) != 1 || string(page.Items[0]["operator"]) != `"`+want.operator+`"` ||
			string(page.Items[0][want.field]) != want.value {
			t.Errorf("%s items: %v %v, want one by %s with %s %s", want.status, err, page.Items, want.operator, want.field, want.value)
		}
	}
}

// readmeBlocks returns the sh blocks of the README's section that starts with heading.
func readmeBlocks(t *testing.T, heading string) []string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("the README has no %q", heading)
	}
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	var blocks []string
	for {
		_, rest, ok := strings.Cut(section, "```sh\n")
		if !ok {
			return blocks
		}
		block, after, _ := strings.Cut(rest, "```")
		blocks, section = append(blocks, block), after
	}
}

// readmeShell runs the few shell forms the README's walkthrough uses: curl to
// 127.0.0.1:8080 (sent to base), go run ./cmd/afloat (run in process), a for loop, and
// VAR=$(… | awk 'NR == 2 {print $1}'). Anything else fails the test.
type readmeShell struct {
	t    *testing.T
	base string
	vars map[string]string
	ran  map[string]bool // the review commands run
}

var (
	readmeFor     = regexp.MustCompile(`^for (\w+) in ([^;]+); do$`)
	readmeCapture = regexp.MustCompile(`^(\w+)=\$\((.*) \| awk 'NR == 2 \{print \$1\}'\)$`)
	readmeVar     = regexp.MustCompile(`^\w+`)
)

func (sh *readmeShell) block(src string) {
	var lines []string
	for _, l := range strings.Split(strings.ReplaceAll(src, "\\\n", " "), "\n") {
		if l = strings.TrimSpace(uncomment(l)); l != "" {
			lines = append(lines, l)
		}
	}
	sh.lines(lines)
}

func (sh *readmeShell) lines(lines []string) {
	for i := 0; i < len(lines); i++ {
		m := readmeFor.FindStringSubmatch(lines[i])
		if m == nil {
			sh.line(lines[i])
			continue
		}
		end := slices.Index(lines[i:], "done")
		if end < 0 {
			sh.t.Fatalf("README: %q has no done", lines[i])
		}
		for _, v := range strings.Fields(m[2]) {
			sh.vars[m[1]] = v
			sh.lines(lines[i+1 : i+end])
		}
		i += end
	}
}

func (sh *readmeShell) line(l string) {
	if m := readmeCapture.FindStringSubmatch(l); m != nil {
		rows := strings.Split(sh.command(m[2]), "\n")
		if len(rows) < 2 || len(strings.Fields(rows[1])) == 0 {
			sh.t.Fatalf("README: %q: no second line to take $1 from", l)
		}
		sh.vars[m[1]] = strings.Fields(rows[1])[0]
		return
	}
	sh.command(l)
}

func (sh *readmeShell) command(l string) string {
	args := sh.split(l)
	switch {
	case len(args) > 0 && args[0] == "curl":
		return sh.curl(l, args[1:])
	case len(args) > 3 && args[0] == "go" && args[1] == "run" && args[2] == "./cmd/afloat":
		var out, errOut bytes.Buffer
		if code := run(context.Background(), args[3:], &out, &errOut); code != 0 {
			sh.t.Fatalf("README: %s\nexit %d\nstdout: %s\nstderr: %s", l, code, out.String(), errOut.String())
		}
		if args[3] == "review" && len(args) > 4 {
			sh.ran[args[4]] = true
		}
		return out.String()
	}
	sh.t.Fatalf("README: a line this test cannot run: %q", l)
	return ""
}

// curl sends what the README's curl line asks for and requires a 2xx answer.
func (sh *readmeShell) curl(l string, args []string) string {
	method, body, target := "", "", ""
	hdr := http.Header{}
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-s":
		case (a == "-X" || a == "-H" || a == "-d") && i+1 < len(args):
			i++
			switch a {
			case "-X":
				method = args[i]
			case "-H":
				k, v, _ := strings.Cut(args[i], ":")
				hdr.Add(k, strings.TrimSpace(v))
			case "-d":
				body = args[i]
			}
		case strings.HasPrefix(a, "-") || target != "":
			sh.t.Fatalf("README: %q: this test's curl does not know %q", l, a)
		default:
			target = a
		}
	}
	path, ok := strings.CutPrefix(target, "127.0.0.1:8080")
	if !ok {
		sh.t.Fatalf("README: %q: the gateway is 127.0.0.1:8080 in the walkthrough", l)
	}
	if method == "" {
		method = http.MethodGet
		if body != "" {
			method = http.MethodPost
		}
	}
	if body != "" && hdr.Get("Content-Type") == "" {
		hdr.Set("Content-Type", "application/x-www-form-urlencoded") // what curl -d sends
	}
	req, err := http.NewRequest(method, sh.base+path, strings.NewReader(body))
	if err != nil {
		sh.t.Fatal(err)
	}
	req.Header = hdr
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		sh.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		sh.t.Fatalf("README: %s\n%d %s", l, resp.StatusCode, b)
	}
	return string(b)
}

// split cuts a command line into words: '…' literal, "…" and bare words with $VAR expanded.
// A variable nobody set fails the test, as set -u would.
func (sh *readmeShell) split(l string) []string {
	var (
		args []string
		cur  strings.Builder
		word bool
	)
	for i := 0; i < len(l); i++ {
		switch c := l[i]; c {
		case ' ', '\t':
			if word {
				args, word = append(args, cur.String()), false
				cur.Reset()
			}
		case '\'', '"':
			j := strings.IndexByte(l[i+1:], c)
			if j < 0 {
				sh.t.Fatalf("README: %q: unclosed %c", l, c)
			}
			s := l[i+1 : i+1+j]
			if c == '"' {
				s = sh.expand(l, s)
			}
			cur.WriteString(s)
			i, word = i+1+j, true
		case '$':
			name := readmeVar.FindString(l[i+1:])
			cur.WriteString(sh.value(l, name))
			i, word = i+len(name), true
		default:
			cur.WriteByte(c)
			word = true
		}
	}
	if word {
		args = append(args, cur.String())
	}
	return args
}

func (sh *readmeShell) expand(l, s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' {
			b.WriteByte(s[i])
			continue
		}
		name := readmeVar.FindString(s[i+1:])
		b.WriteString(sh.value(l, name))
		i += len(name)
	}
	return b.String()
}

func (sh *readmeShell) value(l, name string) string {
	v, ok := sh.vars[name]
	if !ok {
		sh.t.Fatalf("README: %q uses $%s, which nothing sets", l, name)
	}
	return v
}

// uncomment drops a shell comment: a # that starts a word outside quotes, to the end.
func uncomment(l string) string {
	var quote byte
	for i := 0; i < len(l); i++ {
		switch c := l[i]; {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '#' && (i == 0 || l[i-1] == ' ' || l[i-1] == '\t'):
			return l[:i]
		}
	}
	return l
}
