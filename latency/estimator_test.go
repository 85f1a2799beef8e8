package latency

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func newEstimator(t testing.TB, cfg Config) *Estimator {
	t.Helper()
	e, err := NewEstimator(cfg)
	if err != nil {
		t.Fatalf("NewEstimator(%+v): %v", cfg, err)
	}
	return e
}

// near reports whether got is within frac of want.
func near(got, want time.Duration, frac float64) bool {
	return math.Abs(float64(got-want)) <= frac*float64(want)
}

func TestNewEstimatorDefaults(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want Config
	}{
		{"zero", Config{}, Config{
			Percentile: 0.95, Multiplier: 1.5, Min: 200 * time.Millisecond, Max: 10 * time.Second,
			Initial: 2 * time.Second, MinSamples: 20, Window: 500,
		}},
		{"initial follows a low max", Config{Max: time.Second}, Config{
			Percentile: 0.95, Multiplier: 1.5, Min: 200 * time.Millisecond, Max: time.Second,
			Initial: time.Second, MinSamples: 20, Window: 500,
		}},
		{"initial follows a high min", Config{Min: 3 * time.Second}, Config{
			Percentile: 0.95, Multiplier: 1.5, Min: 3 * time.Second, Max: 10 * time.Second,
			Initial: 3 * time.Second, MinSamples: 20, Window: 500,
		}},
		{"all set", Config{0.5, 1, time.Millisecond, time.Minute, time.Second, 1, 2},
			Config{0.5, 1, time.Millisecond, time.Minute, time.Second, 1, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEstimator(t, tt.cfg)
			if got := e.Config(); got != tt.want {
				t.Errorf("Config() = %+v, want %+v", got, tt.want)
			}
			if got := e.ReadTimeout(); got != tt.want.Initial {
				t.Errorf("ReadTimeout() = %v, want Initial %v", got, tt.want.Initial)
			}
		})
	}
}

func TestNewEstimatorInvalid(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string // in the error
	}{
		{"percentile 1", Config{Percentile: 1}, "percentile"},
		{"percentile negative", Config{Percentile: -0.5}, "percentile"},
		{"percentile NaN", Config{Percentile: math.NaN()}, "percentile"},
		{"multiplier below 1", Config{Multiplier: 0.9}, "multiplier"},
		{"multiplier infinite", Config{Multiplier: math.Inf(1)}, "multiplier"},
		{"multiplier NaN", Config{Multiplier: math.NaN()}, "multiplier"},
		{"min negative", Config{Min: -time.Second}, "negative"},
		{"max negative", Config{Max: -time.Second}, "negative"},
		{"initial negative", Config{Initial: -time.Second}, "negative"},
		{"min above max", Config{Min: 2 * time.Second, Max: time.Second}, "exceeds max"},
		{"default min above max", Config{Max: 100 * time.Millisecond}, "exceeds max"},
		{"initial below min", Config{Initial: 100 * time.Millisecond}, "initial"},
		{"initial above max", Config{Initial: time.Minute}, "initial"},
		{"min samples negative", Config{MinSamples: -1}, "min samples"},
		{"window 1", Config{Window: 1}, "window"},
		{"window negative", Config{Window: -10}, "window"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := NewEstimator(tt.cfg)
			if err == nil {
				t.Fatalf("NewEstimator(%+v) = %v, nil; want an error", tt.cfg, e)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "latency: ") {
				t.Errorf("error %q does not name %q", err, tt.want)
			}
		})
	}
}

// empiricalQuantile is the sample of rank q×(n−1), rounded down: the rank DDSketch reads.
func empiricalQuantile(samples []time.Duration, q float64) time.Duration {
	s := slices.Clone(samples)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}

func TestReadTimeoutFollowsPercentile(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	// 200 evenly spaced latencies whose p95 is exactly 100ms, in a seeded random order.
	even := make([]time.Duration, 200)
	for i := range even {
		even[i] = time.Duration(i+1) * 100 * time.Millisecond / 190
	}
	rng.Shuffle(len(even), func(i, j int) { even[i], even[j] = even[j], even[i] })
	// 200 log-normal latencies: median 50ms, p95 about 100ms.
	sigma := math.Ln2 / 1.645
	lognormal := make([]time.Duration, 200)
	for i := range lognormal {
		lognormal[i] = time.Duration(50e6 * math.Exp(sigma*rng.NormFloat64()))
	}

	tests := []struct {
		name    string
		samples []time.Duration
		wantP95 time.Duration
	}{
		{"evenly spaced", even, 100 * time.Millisecond},
		{"log-normal", lognormal, empiricalQuantile(lognormal, 0.95)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEstimator(t, Config{Min: 50 * time.Millisecond, Multiplier: 1.5})
			for _, d := range tt.samples {
				e.Observe(d)
			}
			p, ok := e.Percentile()
			if !ok || !near(p, tt.wantP95, 0.02) {
				t.Errorf("Percentile() = %v, %v; want %v ± 2%%", p, ok, tt.wantP95)
			}
			want := tt.wantP95 * 3 / 2
			if got := e.ReadTimeout(); !near(got, want, 0.02) {
				t.Errorf("ReadTimeout() = %v, want %v ± 2%%", got, want)
			}
			if !near(want, 150*time.Millisecond, 0.1) {
				t.Errorf("the samples' p95 × 1.5 = %v, want about 150ms", want)
			}
			if got := e.Samples(); got != len(tt.samples) {
				t.Errorf("Samples() = %d, want %d", got, len(tt.samples))
			}
		})
	}
}

func TestInitialUntilMinSamples(t *testing.T) {
	const initial = 3 * time.Second
	e := newEstimator(t, Config{Initial: initial, MinSamples: 20})
	check := func(step string, wantWarm bool) {
		t.Helper()
		p, ok := e.Percentile()
		if ok != wantWarm {
			t.Fatalf("%s: Percentile() = %v, %v; want ok %v", step, p, ok, wantWarm)
		}
		rt := e.ReadTimeout()
		if wantWarm == (rt == initial) {
			t.Fatalf("%s: ReadTimeout() = %v with warm %v (Initial %v)", step, rt, wantWarm, initial)
		}
	}
	check("new", false)
	for i := range 19 {
		e.Observe(100 * time.Millisecond)
		check(fmt.Sprintf("after %d successes", i+1), false)
	}
	e.Observe(100 * time.Millisecond)
	check("after 20 successes", true)
}

func TestReadTimeoutClamped(t *testing.T) {
	tests := []struct {
		name   string
		sample time.Duration
		want   time.Duration
	}{
		{"fast provider gets Min", 10 * time.Millisecond, 200 * time.Millisecond},
		{"zero latency gets Min", 0, 200 * time.Millisecond},
		{"negative counts as zero", -time.Second, 200 * time.Millisecond},
		{"slow provider gets Max", 20 * time.Second, 10 * time.Second},
		{"absurd latency gets Max", 1000 * time.Hour, 10 * time.Second},
		{"in between is p95 × 1.5", 2 * time.Second, 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEstimator(t, Config{})
			for range 50 {
				e.Observe(tt.sample)
			}
			if got := e.ReadTimeout(); !near(got, tt.want, 0.01) {
				t.Errorf("ReadTimeout() = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestBrownoutHoldsReadTimeout: a provider measured at p95 = 100 ms slows down so that every
// call is cut by the read timeout. Cuts are not answers: the timeout stays at 150 ms however
// many calls are cut, instead of climbing toward Max (it used to reach 10 s, step by step).
func TestBrownoutHoldsReadTimeout(t *testing.T) {
	for _, window := range []int{0, 100, 2000} {
		t.Run(fmt.Sprint("window ", window), func(t *testing.T) {
			e := newEstimator(t, Config{Window: window, Min: 50 * time.Millisecond})
			for range e.Config().Window {
				e.Observe(100 * time.Millisecond)
			}
			healthy := e.ReadTimeout()
			if !near(healthy, 150*time.Millisecond, 0.02) {
				t.Fatalf("healthy ReadTimeout() = %v", healthy)
			}
			// The brownout: calls are cut, nothing is observed. Answers that still arrive
			// inside the timeout are fast ones and do not raise it either.
			for range 3 * e.Config().Window {
				e.Observe(90 * time.Millisecond)
			}
			if got := e.ReadTimeout(); got > healthy {
				t.Errorf("ReadTimeout() = %v after a brownout, want at most the healthy %v", got, healthy)
			}
		})
	}
}

// TestSlowerAnswersRaiseReadTimeout: when a provider really becomes slower and its answers
// still arrive, they confirm the new latency and the timeout follows them.
func TestSlowerAnswersRaiseReadTimeout(t *testing.T) {
	e := newEstimator(t, Config{Window: 200, Min: 50 * time.Millisecond})
	for range 200 {
		e.Observe(100 * time.Millisecond)
	}
	for range 200 {
		e.Observe(400 * time.Millisecond)
	}
	if got := e.ReadTimeout(); !near(got, 600*time.Millisecond, 0.02) {
		t.Errorf("ReadTimeout() = %v after 200 answers at 400ms, want 600ms", got)
	}
}

func TestMedian(t *testing.T) {
	e := newEstimator(t, Config{MinSamples: 10})
	if _, ok := e.Median(); ok {
		t.Fatal("Median() known before any sample")
	}
	for i := range 100 {
		e.Observe(time.Duration(i+1) * 10 * time.Millisecond) // 10 ms … 1 s
	}
	if m, ok := e.Median(); !ok || !near(m, 500*time.Millisecond, 0.03) {
		t.Errorf("Median() = %v, %v; want about 500ms", m, ok)
	}
	if p, _ := e.Percentile(); !near(p, 950*time.Millisecond, 0.03) {
		t.Errorf("Percentile() = %v, want about 950ms", p)
	}
}

func TestRecoveredProviderTimeoutComesDown(t *testing.T) {
	tests := []struct {
		name   string
		window int
		offset int // samples in the current half when the recovery starts
	}{
		{"aligned", 500, 0},
		{"mid-half", 500, 137},
		{"small window", 40, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEstimator(t, Config{Window: tt.window, Min: 50 * time.Millisecond})
			for range tt.window + tt.offset {
				e.Observe(8 * time.Second)
			}
			if got := e.ReadTimeout(); got != 10*time.Second {
				t.Fatalf("slow provider ReadTimeout() = %v, want Max", got)
			}
			// Fewer than 5% of the window is not enough to move the p95.
			for range tt.window / 50 {
				e.Observe(100 * time.Millisecond)
			}
			if got := e.ReadTimeout(); got != 10*time.Second {
				t.Errorf("after %d fast calls ReadTimeout() = %v, want still Max", tt.window/50, got)
			}
			for range tt.window - tt.window/50 {
				e.Observe(100 * time.Millisecond)
			}
			if got := e.ReadTimeout(); !near(got, 150*time.Millisecond, 0.02) {
				t.Errorf("after %d fast calls ReadTimeout() = %v, want 150ms", tt.window, got)
			}
			if got := e.Samples(); got < tt.window/2 || got > tt.window {
				t.Errorf("Samples() = %d, want within [%d, %d]", got, tt.window/2, tt.window)
			}
		})
	}
}

func TestSamplesStayWithinWindow(t *testing.T) {
	tests := []struct {
		observed, want int
	}{
		{0, 0}, {1, 1}, {249, 249}, {250, 250}, {251, 251}, {499, 499},
		{500, 250}, {501, 251}, {749, 499}, {750, 250}, {10_000, 250},
	}
	for _, tt := range tests {
		t.Run("", func(t *testing.T) {
			e := newEstimator(t, Config{Window: 500})
			for range tt.observed {
				e.Observe(time.Second)
			}
			if got := e.Samples(); got != tt.want {
				t.Errorf("after %d samples Samples() = %d, want %d", tt.observed, got, tt.want)
			}
		})
	}
}

func TestConcurrentObserve(t *testing.T) {
	e := newEstimator(t, Config{})
	const workers, each = 8, 2000
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range each {
				e.Observe(time.Second + time.Duration(i%10))
				if rt := e.ReadTimeout(); rt < e.Config().Min || rt > e.Config().Max {
					t.Errorf("ReadTimeout() = %v outside [Min, Max]", rt)
					return
				}
				e.Percentile()
				e.Samples()
			}
		})
	}
	wg.Wait()
	if got := e.ReadTimeout(); !near(got, 1500*time.Millisecond, 0.01) {
		t.Errorf("ReadTimeout() = %v, want 1.5s", got)
	}
	if got := e.Samples(); got < 250 || got > 500 {
		t.Errorf("Samples() = %d, want within the window", got)
	}
}

func BenchmarkObserve(b *testing.B) {
	e := newEstimator(b, Config{})
	rng := rand.New(rand.NewPCG(1, 2))
	ds := make([]time.Duration, 1024)
	for i := range ds {
		ds[i] = time.Duration(50e6 * math.Exp(0.42*rng.NormFloat64()))
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		e.Observe(ds[i%len(ds)])
	}
}

func BenchmarkObserveParallel(b *testing.B) {
	e := newEstimator(b, Config{})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		d := 40 * time.Millisecond
		for pb.Next() {
			e.Observe(d)
			d = 40*time.Millisecond + (d+7*time.Millisecond)%(200*time.Millisecond)
		}
	})
}

func BenchmarkReadTimeout(b *testing.B) {
	e := newEstimator(b, Config{})
	for i := range 1000 {
		e.Observe(time.Duration(i) * time.Millisecond)
	}
	b.ReportAllocs()
	var sink time.Duration
	for b.Loop() {
		sink += e.ReadTimeout()
	}
	if sink <= 0 {
		b.Fatal("ReadTimeout returned nothing")
	}
}
