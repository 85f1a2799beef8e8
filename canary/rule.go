package canary

import (
	"fmt"
	"time"
)

// Judge applies the decision rule of the package comment to two arms' figures, with t's zero
// fields at their defaults, as a canary decides: whether the candidate is to be rolled back,
// and one reason per figure compared. An offline comparison (recorded fixtures) uses it to
// say what the canary would decide.
func Judge(inc, cand Figures, t Thresholds) (rollback bool, reasons []string) {
	return judge(inc, cand, t.withDefaults())
}

// judge applies the decision rule of the package comment to the figures of both arms: it
// reports whether the candidate is to be rolled back, and one reason per figure compared.
func judge(inc, cand Figures, t Thresholds) (rollback bool, reasons []string) {
	points := func(name string, c, i, limit float64) {
		d := c - i
		verdict := "<="
		if d > limit {
			verdict, rollback = ">", true
		}
		reasons = append(reasons, fmt.Sprintf("%s %.1f%% vs %.1f%% (%+.1f points %s %.1f)",
			name, c*100, i*100, d*100, verdict, limit*100))
	}
	relative := func(name, c, i string, ratio float64, ok bool, limit float64) {
		if !ok {
			reasons = append(reasons, fmt.Sprintf("%s %s vs %s (not compared: the incumbent's is 0)", name, c, i))
			return
		}
		verdict := "<="
		if ratio-1 > limit {
			verdict, rollback = ">", true
		}
		reasons = append(reasons, fmt.Sprintf("%s %s vs %s (%+.1f%% %s %.1f%%)",
			name, c, i, (ratio-1)*100, verdict, limit*100))
	}
	points("violation rate", cand.ViolationRate, inc.ViolationRate, t.ViolationRate)
	points("re-ask rate", cand.ReaskRate, inc.ReaskRate, t.ReaskRate)
	points("failure rate", cand.FailureRate, inc.FailureRate, t.FailureRate)
	relative("p95 latency", round(cand.P95).String(), round(inc.P95).String(),
		float64(cand.P95)/float64(inc.P95), inc.P95 > 0, t.P95)
	relative("cost per answer", fmt.Sprintf("%.4g", cand.CostPerAnswer), fmt.Sprintf("%.4g", inc.CostPerAnswer),
		cand.CostPerAnswer/inc.CostPerAnswer, inc.CostPerAnswer > 0, t.Cost)
	return rollback, reasons
}

// round rounds d to the millisecond for reading, unless it is shorter.
func round(d time.Duration) time.Duration {
	if d < time.Millisecond {
		return d
	}
	return d.Round(time.Millisecond)
}
