package cascade

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/latency"
	"github.com/afloat-dev/afloat/limit"
)

// burst runs workers callers, each making calls of task in turn for d, and counts who answered.
func burst(t *testing.T, task *Task, workers int, d time.Duration) (byProvider map[string]int, failed int) {
	t.Helper()
	var mu sync.Mutex
	byProvider = map[string]int{}
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for time.Now().Before(end) {
				res, err := task.RunJSON(context.Background(), ticket)
				mu.Lock()
				if err != nil || res.Source != afloat.SourceModel {
					failed++
				} else {
					byProvider[res.Provider]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return byProvider, failed
}

// TestAdaptiveConcurrencySmoothsABurst: 128 callers at once on a healthy primary answering in
// 50 ms: the limit (from 128, half of max_in_flight) grows with the demand, and what does not
// fit waits its turn in the queue instead of spilling to the backup. Then the primary slows tenfold: its
// limit falls, and what does not fit under it goes to the backup within the budget.
func TestAdaptiveConcurrencySmoothsABurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var slow atomic.Bool
		primary := func(ctx context.Context, req *afloat.Request, n int) (*afloat.Response, error) {
			d := 50 * time.Millisecond
			if slow.Load() {
				d = 500 * time.Millisecond
			}
			return after(d, answer(validAnswer))(ctx, req, n)
		}
		fx := newFixture(t, func(c *Config) {
			realClock(c)
			// The read timeout at least 1 s: the slowed primary still answers in time, so that
			// the bulkhead, not the timeout and the breaker, decides where calls go.
			c.Providers[0].Timeouts = latency.Config{Min: time.Second, Max: 10 * time.Second, Initial: time.Second}
		}, primary, after(50*time.Millisecond, answer(validAnswer)))
		// A budget of 1.5 s: a call waits for a slot at most about 475 ms once the primary is
		// slow (half of what is left above its median and the backup's reserve).
		task := fx.task(t, func(c *TaskConfig) { c.Budget = 1500 * time.Millisecond })
		limitBefore, _ := fx.eng.Concurrency("p0")

		healthy, failed := burst(t, task, 128, 2*time.Second)
		limitHealthy, _ := fx.eng.Concurrency("p0")
		t.Logf("healthy, 128 callers for 2 s: %v answered, %d failed; p0's limit %d → %d", healthy, failed, limitBefore, limitHealthy)
		if failed != 0 || healthy["p1"] != 0 {
			t.Errorf("healthy burst: %d failed, %d of %d answered by the backup; want none of either", failed, healthy["p1"], healthy["p0"]+healthy["p1"])
		}
		if limitHealthy <= limitBefore {
			t.Errorf("p0's limit %d → %d after 2 s of 128 callers; want it grown toward the demand", limitBefore, limitHealthy)
		}

		slow.Store(true)
		slowed, failed := burst(t, task, 128, 6*time.Second)
		limitSlow, _ := fx.eng.Concurrency("p0")
		total := slowed["p0"] + slowed["p1"]
		t.Logf("p0 10× slower, 128 callers for 6 s: %v answered, %d failed; p0's limit %d → %d; %.1f %% to the backup",
			slowed, failed, limitHealthy, limitSlow, 100*float64(slowed["p1"])/float64(total))
		if failed != 0 {
			t.Errorf("%d calls failed after the slowdown; the backup has room for the excess", failed)
		}
		if limitSlow > limitHealthy/2 {
			t.Errorf("p0's limit %d → %d after it slowed tenfold; want it at least halved", limitHealthy, limitSlow)
		}
		if slowed["p1"] == 0 {
			t.Error("no call went to the backup after the primary's limit fell")
		}
		if got := opened(fx, "p0"); got != 0 {
			t.Errorf("p0's breaker opened %v times: a slow but answering primary is no outage", got)
		}
	})
}

// TestLoadOf: what an attempt tells the concurrency limit. A timeout, a 429 or an overload
// answer (503, 529) is a drop; another failure (a 500, a refused connection) is the breaker's
// business, not a sign the provider is full; an answer is a sample, even one that broke the
// contract.
func TestLoadOf(t *testing.T) {
	for _, c := range []struct {
		outcome afloat.Outcome
		err     error
		want    limit.Outcome
	}{
		{afloat.OutcomeOK, nil, limit.Success},
		{afloat.OutcomeContractViolation, &afloat.ContractError{}, limit.Success},
		{afloat.OutcomeTimeout, &afloat.ProviderError{Kind: afloat.Unavailable, Timeout: true}, limit.Dropped},
		{afloat.OutcomeRateLimited, &afloat.ProviderError{Status: 429, Kind: afloat.Throttled}, limit.Dropped},
		{afloat.OutcomeUnavailable, &afloat.ProviderError{Status: 503, Kind: afloat.Unavailable}, limit.Dropped},
		{afloat.OutcomeUnavailable, &afloat.ProviderError{Status: 529, Kind: afloat.Unavailable}, limit.Dropped},
		{afloat.OutcomeUnavailable, &afloat.ProviderError{Status: 500, Kind: afloat.Unavailable}, limit.Ignore},
		{afloat.OutcomeUnavailable, &afloat.ProviderError{Kind: afloat.Unavailable, Err: errors.New("connection refused")}, limit.Ignore},
		{afloat.OutcomeDeadline, context.Canceled, limit.Ignore},
		{afloat.OutcomeUnusable, &afloat.ProviderError{Status: 401, Kind: afloat.Unusable}, limit.Ignore},
	} {
		if got := loadOf(c.outcome, c.err); got != c.want {
			t.Errorf("loadOf(%s, %v) = %d; want %d", c.outcome, c.err, got, c.want)
		}
	}
}
