package config

import (
	"math"
	"sync/atomic"

	"github.com/afloat-dev/afloat/alerts"
	"github.com/afloat-dev/afloat/breaker"
	"github.com/afloat-dev/afloat/canary"
	"github.com/afloat-dev/afloat/telemetry"
)

// defaultEvaluateEvery is alerts.evaluate_every's default.
const defaultEvaluateEvery = alerts.DefaultInterval

// alertKeys are the alerts of an Alerts block, by key.
func (a *Alerts) alertKeys() []struct {
	name  alerts.Name
	alert *Alert
} {
	return []struct {
		name  alerts.Name
		alert *Alert
	}{
		{alerts.FallbackShare, &a.FallbackShare},
		{alerts.PrimaryOpen, &a.PrimaryOpen},
		{alerts.ContractViolationRate, &a.ContractViolationRate},
		{alerts.ReviewSLA, &a.ReviewSLA},
		{alerts.Unusable, &a.Unusable},
		{alerts.DrillStale, &a.DrillStale},
		{alerts.CanaryRolledBack, &a.CanaryRolledBack},
	}
}

// alerts validates the alerts block and fills in the defaults of each alert the file writes.
func (v *validator) alerts() {
	a := &v.f.Alerts
	if !v.written("alerts.evaluate_every") {
		a.EvaluateEvery = defaultEvaluateEvery
	}
	v.positive("alerts.evaluate_every", a.EvaluateEvery)
	for _, k := range a.alertKeys() {
		p, al := "alerts."+string(k.name), k.alert
		al.On = v.written(p)
		rate := k.name == alerts.FallbackShare || k.name == alerts.ContractViolationRate
		switch {
		case rate && (al.Above < 0 || al.Above > 1):
			v.errorf(p+".above", "%v is outside [0, 1]", al.Above)
		case k.name == alerts.ReviewSLA && (al.Above < 0 || al.Above != math.Trunc(al.Above)):
			v.errorf(p+".above", "%v is not a number of items (a whole number, 0 or more)", al.Above)
		case !rate && k.name != alerts.ReviewSLA && v.written(p+".above"):
			v.errorf(p+".above", "%s has no threshold: it fires on its condition alone", k.name)
		}
		v.nonNegative(p+".for", al.For)
		if rate {
			if !v.written(p + ".window") {
				al.Window = alerts.DefaultWindow
			}
			if !v.written(p + ".min_calls") {
				al.MinCalls = alerts.DefaultMinCalls
			}
			v.positive(p+".window", al.Window)
			v.atLeast(p+".min_calls", al.MinCalls, 1)
		} else {
			for _, key := range []string{"window", "min_calls"} {
				if v.written(p + "." + key) {
					v.errorf(p+"."+key, "applies to fallback_share and contract_violation_rate only")
				}
			}
		}
		v.httpURL(p+".webhook", al.Webhook)
		if al.Secret != "" && al.Webhook == "" {
			v.errorf(p+".secret", "signs the webhook, and there is none")
		}
	}
}

// breakerEvents returns the hook every provider's breaker reports its changes to: the
// unusable alert's record of openings, nil when that alert is off.
func (b *builder) breakerEvents() func(breaker.Event) {
	if !b.f.Alerts.Unusable.On {
		return nil
	}
	if b.openings == nil {
		b.openings = alerts.NewOpenings()
	}
	return b.openings.Record
}

// alerts builds the alert evaluator when the file turns an alert on, and starts it when
// Build opens stores (Check starts nothing). Its afloat_alerts_firing series are exported at
// 0 for every alert on.
func (b *builder) alerts(opts BuildOptions) {
	rt, f := b.rt, b.f
	if b.prev != nil {
		rt.Alerts = b.prev.Alerts // alerts.* takes a restart; the reload retargets it
		return
	}
	var rules []alerts.Rule
	var names []string
	for _, k := range f.Alerts.alertKeys() {
		if al := k.alert; al.On {
			rules = append(rules, alerts.Rule{Name: k.name, Above: al.Above, For: al.For, Window: al.Window,
				MinCalls: al.MinCalls, Webhook: al.Webhook, Secret: al.Secret})
			names = append(names, string(k.name))
		}
	}
	if len(rules) == 0 || rt.Engine == nil {
		return
	}
	gauge, err := telemetry.NewAlertsFiring(b.reg, names)
	if err != nil {
		b.errorf("alerts", "metrics: %v", err)
		return
	}
	cfg := alerts.Config{
		Rules: rules, Providers: rt.ProviderOrder, Counts: alerts.MetricCounts{Metrics: rt.Metrics},
		Breakers: liveBreakers{rt.live}, Openings: b.openings, DrillMaxAge: f.Drill.MaxAge, Interval: f.Alerts.EvaluateEvery,
		Clock: b.clock, Logger: b.log, Firing: gauge, Rand: b.rand,
	}
	if cfg.Openings == nil {
		cfg.Openings = alerts.NewOpenings() // unusable is off: nothing reads it
	}
	if rt.Review != nil {
		cfg.Reviews = rt.Review
	}
	if rt.State != nil {
		cfg.Drills = rt.State
	}
	cfg.Canaries = liveCanaries{rt.live}
	cfg.Tasks = rt.alertTasks()
	ev, err := alerts.New(cfg)
	if err != nil {
		b.errorf("alerts", "%v", err)
		return
	}
	rt.Alerts = ev
	if opts.openReview {
		ev.Start()
		b.log.Info("alerts evaluated", "alerts", names, "every", f.Alerts.EvaluateEvery.String())
	}
}

// liveCanaries reads the canaries of the runtime in force, for the alert evaluator, which
// outlives reloads. Reading a canary decides it when it is due, so that a canary without
// traffic is decided too.
type liveCanaries struct{ live *atomic.Pointer[Runtime] }

func (l liveCanaries) RolledBack() map[string]bool {
	rt := l.live.Load()
	out := map[string]bool{}
	if rt == nil {
		return out
	}
	for name, t := range rt.Tasks {
		if st, ok := t.Canary(); ok {
			out[name] = st.State == canary.RolledBack
		}
	}
	return out
}

// alertTasks are the tasks and routes the alerts watch, with their tiers' providers.
func (rt *Runtime) alertTasks() []alerts.Task {
	var out []alerts.Task
	for _, name := range rt.TaskOrder {
		t := alerts.Task{Name: name, ReviewSLA: rt.ReviewSLA[name]}
		for _, tr := range rt.File.Task(name).Cascade {
			t.Providers = append(t.Providers, tr.Provider)
		}
		out = append(out, t)
	}
	for _, name := range rt.RouteOrder {
		t := alerts.Task{Name: name}
		for _, tr := range rt.File.Route(name).Cascade {
			t.Providers = append(t.Providers, tr.Provider)
		}
		out = append(out, t)
	}
	return out
}
