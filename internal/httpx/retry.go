package httpx

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// RetryAfter returns the wait a response asked for: `retry-after-ms` in milliseconds (sent by
// OpenAI and Azure), else `Retry-After` in seconds or as an HTTP date, measured from now. It
// returns 0 when neither header is present or parsable, or when the date has passed.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	if d, ok := parseNumber(h.Get("Retry-After-Ms"), time.Millisecond); ok {
		return d
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if d, ok := parseNumber(v, time.Second); ok {
		return d
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return min(d, maxWait)
		}
	}
	return 0
}

// maxWait bounds a parsed wait so that an absurd header cannot overflow a Duration.
const maxWait = 24 * time.Hour

// parseNumber reads a non-negative decimal number of units. Fractions are accepted because
// the OpenAI SDKs send and read them ("retry-after-ms: 1.5").
func parseNumber(v string, unit time.Duration) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || f < 0 {
		return 0, false
	}
	if f*float64(unit) > float64(maxWait) {
		return maxWait, true
	}
	return time.Duration(f * float64(unit)), true
}
