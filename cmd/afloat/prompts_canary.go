package main

import (
	"cmp"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/afloat-dev/afloat/canary"
	"github.com/afloat-dev/afloat/config"
	"github.com/afloat-dev/afloat/normalize"
)

// promptCanary is a task's canary as the fixtures of its two arms judge it.
type promptCanary struct {
	task                 string
	tier                 int
	incumbent, candidate promptArm
	rows                 []promptRow // the candidate's, for its failures' reasons
	verdict              string      // the verdict, or why there is none
}

// promptArm is one arm of a canary: the tier's prompt and provider, or the candidate's.
type promptArm struct {
	provider, version string
	tally             promptTally
}

// canary runs the fixtures of the candidate of task t's canary through c, the contract the
// tier's went through, and judges them against inc, the tier's tally, by the canary's rule.
// c is nil when the task's schema does not compile.
func (s *promptSuite) canary(t *config.Task, c *normalize.Contract, inc promptTally) {
	cfg, tier := t.Canary, t.Cascade[t.Canary.Tier]
	template := cmp.Or(cfg.Prompt, tier.Prompt)
	k := promptCanary{
		task: t.Name, tier: cfg.Tier,
		incumbent: promptArm{provider: tier.Provider, version: promptVersion(tier.Prompt), tally: inc},
		candidate: promptArm{provider: cmp.Or(cfg.Provider, tier.Provider), version: promptVersion(template)},
	}
	cand := &k.candidate.tally
	switch {
	case c == nil:
		k.verdict = "no verdict: the task's schema does not compile"
	case normalize.FixtureDir(template) == normalize.FixtureDir(tier.Prompt):
		// Fixtures belong to a template, and a template is written for one model (it is
		// named after it): the ones beside the tier's are the tier's provider's outputs, and
		// running them again would compare the incumbent with itself.
		if !s.selects(t.Name, k.candidate.provider, "") {
			return
		}
		cand.bare = true
		s.bare++
		k.verdict = fmt.Sprintf("no verdict: the candidate has no fixtures of its own: those beside %s are %s's outputs; record %s's beside a template of its own (canary.prompt)",
			s.rel(tier.Prompt), tier.Provider, k.candidate.provider)
	default:
		row := promptRow{task: t.Name, provider: k.candidate.provider, version: k.candidate.version}
		k.rows, *cand = s.fixtures(c, row, template)
		if cand.err != nil {
			s.failed++
		}
		if cand.bare {
			s.bare++
		}
		if s.filter != nil && inc == (promptTally{}) && *cand == (promptTally{}) {
			return // -run selects neither arm
		}
		switch {
		case cand.run() == 0:
			k.verdict = "no verdict for the candidate: " + s.none(*cand, template)
		case inc.run() == 0:
			k.verdict = "no verdict for the incumbent: " + s.none(inc, tier.Prompt)
		default:
			rollback, reason := judge(cfg.RollbackIf, inc, *cand)
			switch {
			case rollback:
				k.verdict = "candidate would be rolled back: " + reason
				s.rolledBack++
			default:
				k.verdict = "candidate holds: " + reason
				s.held++
			}
		}
	}
	s.canaries = append(s.canaries, k)
}

// selects reports whether the -run filter selects the fixture of task and provider, or with
// fixture "" the note that a prompt has none.
func (s *promptSuite) selects(task, provider, fixture string) bool {
	return s.filter == nil || s.filter.MatchString(task+"/"+provider+"/"+fixture)
}

// none says why an arm whose template is template ran no fixture.
func (s *promptSuite) none(t promptTally, template string) string {
	switch {
	case t.err != nil:
		return fmt.Sprintf("the fixtures beside %s do not load", s.rel(template))
	case t.bare:
		return fmt.Sprintf("no fixtures beside %s: record some", s.rel(template))
	case s.filter != nil:
		return fmt.Sprintf("-run selects none of the fixtures beside %s", s.rel(template))
	default:
		return fmt.Sprintf("the fixtures folder beside %s is empty: record some", s.rel(template))
	}
}

// rel returns path relative to the config file's folder when it is inside it.
func (s *promptSuite) rel(path string) string {
	if r, err := filepath.Rel(s.dir, path); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return path
}

// judge applies the running canary's own rule (canary.Judge, with the thresholds as the
// gateway takes them) to the fixtures of both arms, so that this command and the gateway
// cannot disagree on a threshold or its default: each fixture run is one call, and a failed
// one a violation. A fixture has no latency, cost or re-ask, so those figures are equal (or
// not compared) and the violation rate alone decides; reason is the rule's line for it.
func judge(th config.CanaryThresholds, inc, cand promptTally) (rollback bool, reason string) {
	figures := func(t promptTally) canary.Figures {
		f := canary.Figures{Calls: t.run()}
		if f.Calls > 0 {
			f.ViolationRate = float64(t.failed) / float64(f.Calls)
		}
		return f
	}
	rollback, reasons := canary.Judge(figures(inc), figures(cand), th.Canary())
	for _, r := range reasons {
		if strings.HasPrefix(r, "violation rate ") {
			reason = r
		}
	}
	return rollback, reason
}

// reportCanaries prints one comparison per canary: a row per arm and the verdict.
func (s *promptSuite) reportCanaries(stdout io.Writer) {
	for _, k := range s.canaries {
		fmt.Fprintf(stdout, "\ncanary of %s, tier %d:\n", k.task, k.tier)
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ARM\tPROVIDER\tVERSION\tFIXTURES\tPASSED\tVIOLATION RATE\tNORMALIZED")
		for _, a := range []struct {
			name string
			promptArm
		}{{"incumbent", k.incumbent}, {"candidate", k.candidate}} {
			t := a.tally
			rate, normalized := "-", "-"
			if t.run() > 0 {
				rate = fmt.Sprintf("%.1f%%", float64(t.failed)/float64(t.run())*100)
				normalized = strconv.Itoa(t.normalized)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\n", a.name, a.provider, a.version, t.run(), t.passed, rate, normalized)
		}
		tw.Flush()
		fmt.Fprintln(stdout, k.verdict)
	}
}
