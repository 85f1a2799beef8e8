package config

import (
	"context"
	"log/slog"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/afloat-dev/afloat/cascade"
	"github.com/afloat-dev/afloat/review"
	"github.com/afloat-dev/afloat/review/webhook"
)

// slaCheckTimeout bounds the review SLA watch's reading of the queue at a scrape, which waits
// for it.
const slaCheckTimeout = 2 * time.Second

// reviewWebhook starts the sender of review.webhook when Build opens stores (Check starts
// nothing). The file's store was opened with the outbox on (reviewStore); a store the host
// gave must be opened with review.Options.Outbox by the host, or nothing is ever due.
func (b *builder) reviewWebhook(opts BuildOptions) {
	w := b.f.Review.Webhook
	if b.prev != nil {
		b.rt.Webhook = b.prev.Webhook // review.* takes a restart
		return
	}
	if w.URL == "" || b.rt.Review == nil || !opts.openReview {
		return
	}
	s, err := webhook.New(webhook.Config{Store: b.rt.Review, URL: w.URL, Secret: w.Secret, Clock: b.clock, Rand: b.rand, Logger: b.log})
	if err != nil {
		b.errorf("review.webhook.url", "%v", err)
		return
	}
	b.rt.Webhook = s
	s.Start()
	b.log.Info("review webhook on", "attempts", webhook.DefaultAttempts, "max_backoff", webhook.DefaultMaxBackoff.String())
}

// reviewSLA makes afloat_review_sla_breaches_total count, when scraped, the items of every
// human task that outlived its review_sla since Build (review.SLAWatch). Check counts
// nothing.
func (b *builder) reviewSLA(opts BuildOptions) {
	rt := b.rt
	if b.prev != nil || !opts.openReview || rt.Review == nil || rt.Metrics == nil {
		return // a reload watches its SLAs when it commits
	}
	rt.watchSLA(b.clock, b.log)
}

// humanSLAs returns the review SLA of each task that queues for a human.
func (rt *Runtime) humanSLAs() map[string]time.Duration {
	sla := map[string]time.Duration{}
	for name, t := range rt.Tasks {
		if t.Policy() == cascade.PolicyHuman {
			sla[name] = rt.ReviewSLA[name]
		}
	}
	return sla
}

// watchSLA makes the scrapes of afloat_review_sla_breaches_total check rt's human tasks.
func (rt *Runtime) watchSLA(clock clockwork.Clock, log *slog.Logger) {
	sla := rt.humanSLAs()
	if len(sla) == 0 {
		rt.Metrics.ReviewSLABreaches.SetRefresh(nil)
		return
	}
	w := review.NewSLAWatch(rt.Review, sla, review.Options{Clock: clock, Metrics: rt.Metrics, Logger: log})
	rt.Metrics.ReviewSLABreaches.SetRefresh(func() {
		ctx, cancel := context.WithTimeout(context.Background(), slaCheckTimeout)
		defer cancel()
		if _, err := w.Check(ctx); err != nil {
			log.Warn("review SLA watch: reading the review queue", "err", err)
		}
	})
}

// closeReviewWatch stops the webhook sender and the SLA watch, before the review store
// closes.
func (rt *Runtime) closeReviewWatch() {
	if rt.Metrics != nil {
		rt.Metrics.ReviewSLABreaches.SetRefresh(nil)
	}
	rt.Webhook.Close() // idempotent; a Wake after it does nothing
}
