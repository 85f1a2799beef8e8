package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"text/tabwriter"

	"github.com/afloat-dev/afloat/config"
	"github.com/afloat-dev/afloat/normalize"
	"github.com/afloat-dev/afloat/prompt"
)

const promptsUsage = `Usage: afloat prompts test -c afloat.yaml [-run REGEXP] [-strict]

Runs the recorded outputs of every prompt of every task (the fixtures in the folder beside
each template: prompts/triage/gigachat-pro.v3.tmpl has prompts/triage/gigachat-pro.v3.fixtures/)
through normalization and validation against the task's schema and synonyms, and prints one
row per fixture: task, provider, prompt version, fixture, pass or FAIL, and the stage the answer
was refused at. Exits 1 when any fixture fails. Run it when you edit a prompt or switch a model.

A fixture is NAME.out (the model's output, as it came) and NAME.want (the expected result as
JSON, or "reject: extract|repair|truncated|schema", and "finish: stop|length" when the
provider's finish reason matters); see the normalize package's Fixture for the format.
A task's canary has its candidate's fixtures run too (those beside canary.prompt), and one
comparison printed per canary: for the incumbent (the tier's prompt) and the candidate, the
fixtures run and passed, the violation rate (failed / run) and how many answers a step of
normalization changed; then the verdict of the canary's rule with its rollback_if.violation_rate.
A candidate that would be rolled back fails the run. A candidate without fixtures of its own
gets no verdict, and fails the run with -strict; one that only changes the provider has none,
since the fixtures beside the tier's template are the outputs of the tier's provider.

Environment variables the config uses and the environment lacks are filled with a placeholder:
the test needs no credentials.
`

// prompts runs `afloat prompts test`: the contract tests of every prompt's fixtures.
func prompts(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "test" {
		fmt.Fprint(stderr, promptsUsage)
		return errUsage
	}
	flags := flag.NewFlagSet("prompts test", flag.ContinueOnError)
	flags.SetOutput(stderr)
	path := flags.String("c", "afloat.yaml", "the config file whose prompts are tested")
	run := flags.String("run", "", "test only the fixtures whose task/provider/fixture matches this regular expression")
	strict := flags.Bool("strict", false, "fail when a prompt has no fixtures")
	flags.Usage = func() {
		fmt.Fprint(stderr, promptsUsage+"\nFlags:\n")
		flags.PrintDefaults()
	}
	if err := flags.Parse(args[1:]); err != nil {
		return errUsage
	}
	if flags.NArg() > 0 {
		fmt.Fprintf(stderr, "afloat prompts test: unexpected argument %q\n", flags.Arg(0))
		return errUsage
	}
	var filter *regexp.Regexp
	if *run != "" {
		re, err := regexp.Compile(*run)
		if err != nil {
			fmt.Fprintf(stderr, "afloat prompts test: -run: %v\n", err)
			return errUsage
		}
		filter = re
	}
	f, err := loadForPrompts(*path)
	if err != nil {
		var errs config.Errors
		if errors.As(err, &errs) {
			for _, e := range errs {
				fmt.Fprintf(stderr, "%s: %v\n", *path, e)
			}
		} else {
			fmt.Fprintf(stderr, "%s: %v\n", *path, err)
		}
		return errFailed
	}
	s := promptSuite{filter: filter}
	s.run(f)
	return s.report(stdout, stderr, *strict)
}

// loadForPrompts loads a config as config.Load does, with a placeholder for every variable
// the environment lacks.
func loadForPrompts(path string) (*config.File, error) {
	f, _, err := config.LoadOffline(path) // the test needs no credentials
	return f, err
}

// promptRow is one line of the table.
type promptRow struct {
	task, provider, version, fixture string
	result                           string // pass, FAIL, or a note when there is no fixture to run
	stage                            string
	problem                          string // why it failed
}

type promptSuite struct {
	filter   *regexp.Regexp
	dir      string // the config file's folder, which the notes' paths are relative to
	rows     []promptRow
	canaries []promptCanary

	passed, failed, bare int // bare: prompts without fixtures
	rolledBack, held     int // canary candidates whose fixtures would roll them back, or not
}

func (s *promptSuite) run(f *config.File) {
	s.dir = f.Dir
	for _, t := range f.Tasks {
		schema, err := os.ReadFile(t.Schema)
		var c *normalize.Contract
		if err == nil {
			c, err = normalize.Compile(t.Name, schema, normalize.WithSynonyms(t.Synonyms))
		}
		tallies := make([]promptTally, len(t.Cascade))
		for i, tr := range t.Cascade {
			row := promptRow{task: t.Name, provider: tr.Provider, version: promptVersion(tr.Prompt)}
			if err != nil {
				s.fail(row, "schema", err.Error())
				continue
			}
			tallies[i] = s.tier(c, row, tr.Prompt)
		}
		if t.Canary != nil {
			s.canary(t, c, tallies[t.Canary.Tier])
		}
	}
}

// promptVersion is a prompt template's version for the table: v3, or "-" when its name has none.
func promptVersion(template string) string {
	if v := prompt.Version(template); v != "" {
		return v
	}
	return "-"
}

// promptTally is what the fixtures of one prompt came to.
type promptTally struct {
	passed, failed int   // fixtures run
	normalized     int   // fixtures run whose answer some step changed (locate, repair, rename, coerce)
	bare           bool  // the prompt has no fixtures folder (and the filter selects it)
	err            error // its fixtures folder does not load
}

func (t promptTally) run() int { return t.passed + t.failed }

// tier runs the fixtures of one prompt template into the table.
func (s *promptSuite) tier(c *normalize.Contract, row promptRow, template string) promptTally {
	rows, t := s.fixtures(c, row, template)
	s.rows = append(s.rows, rows...)
	s.passed += t.passed
	s.failed += t.failed
	if t.err != nil {
		s.failed++
	}
	if t.bare {
		s.bare++
	}
	return t
}

// fixtures runs the fixtures of one prompt template through c: one row per fixture the
// filter selects, or one saying why there is none to run, and their tally.
func (s *promptSuite) fixtures(c *normalize.Contract, row promptRow, template string) ([]promptRow, promptTally) {
	var rows []promptRow
	var t promptTally
	dir := normalize.FixtureDir(template)
	fixtures, err := normalize.LoadFixtures(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if s.selects(row.task, row.provider, "") {
			row.fixture, row.result, row.stage = "-", "no fixtures", "-"
			rows = append(rows, row)
			t.bare = true
		}
		return rows, t
	case err != nil:
		row.fixture = filepath.Base(dir)
		t.err = err
		return append(rows, failed(row, "-", err.Error())), t
	}
	for _, fx := range fixtures {
		if !s.selects(row.task, row.provider, fx.Name) {
			continue
		}
		r := c.RunFixture(fx)
		if r.Outcome.Steps != 0 {
			t.normalized++
		}
		row := row
		row.fixture, row.stage = fx.Name, r.Stage()
		if row.stage == "" {
			row.stage = "-"
		}
		if !r.Pass {
			rows = append(rows, failed(row, row.stage, r.Problem))
			t.failed++
			continue
		}
		row.result = "pass"
		rows = append(rows, row)
		t.passed++
	}
	return rows, t
}

func (s *promptSuite) fail(row promptRow, stage, problem string) {
	s.rows = append(s.rows, failed(row, stage, problem))
	s.failed++
}

// failed returns row as a failure at stage, for problem.
func failed(row promptRow, stage, problem string) promptRow {
	if row.fixture == "" {
		row.fixture = "-"
	}
	row.result, row.stage, row.problem = "FAIL", stage, problem
	return row
}

// report prints the table, the failures' reasons and a summary, and returns errFailed when
// the suite failed.
func (s *promptSuite) report(stdout, stderr io.Writer, strict bool) error {
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK\tPROVIDER\tVERSION\tFIXTURE\tRESULT\tSTAGE")
	for _, r := range s.rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.task, r.provider, r.version, r.fixture, r.result, r.stage)
	}
	tw.Flush()
	s.reportCanaries(stdout)
	for _, r := range s.rows {
		if r.problem != "" {
			fmt.Fprintf(stderr, "FAIL %s/%s/%s/%s: %s\n", r.task, r.provider, r.version, r.fixture, r.problem)
		}
	}
	for _, k := range s.canaries {
		for _, r := range k.rows {
			if r.problem != "" {
				fmt.Fprintf(stderr, "FAIL %s/%s/%s/%s (canary candidate): %s\n", r.task, r.provider, r.version, r.fixture, r.problem)
			}
		}
	}
	fmt.Fprintf(stdout, "\n%d passed, %d failed; %d prompt(s) without fixtures", s.passed, s.failed, s.bare)
	if len(s.canaries) > 0 {
		fmt.Fprintf(stdout, "; canary candidates: %d would be rolled back, %d would hold", s.rolledBack, s.held)
	}
	fmt.Fprintln(stdout)
	if s.failed > 0 || s.rolledBack > 0 || (strict && s.bare > 0) {
		return errFailed
	}
	return nil
}
