package latency

import (
	"fmt"
	"math"
	"time"
)

// Config sets how an Estimator turns measured latency into a read timeout
// (DESIGN.md §4 defaults.timeouts). The zero Config uses every default.
type Config struct {
	// Percentile is the quantile of recent latencies that the read timeout is built on, in
	// (0, 1). 0 means 0.95.
	Percentile float64
	// Multiplier scales the percentile into the read timeout: headroom for the slow tail
	// above it. At least 1; 0 means 1.5.
	Multiplier float64
	// Min is the shortest read timeout, however fast the provider has been. 0 means 200ms.
	Min time.Duration
	// Max is the longest read timeout, however slow the provider has been. 0 means 10s.
	Max time.Duration
	// Initial is the read timeout until MinSamples calls have succeeded: before that the
	// estimate is noise. 0 means 2s, or Min or Max when 2s falls outside [Min, Max]; a value
	// set outside [Min, Max] is an error.
	Initial time.Duration
	// MinSamples is how many successful calls the estimate needs before it replaces
	// Initial. 0 means 20.
	MinSamples int
	// Window is about how many recent answers (cut calls are not samples) the estimate
	// covers: it reads the last Window/2 to Window samples. At least 2; 0 means 500.
	Window int
}

const (
	defaultPercentile = 0.95
	defaultMultiplier = 1.5
	defaultMin        = 200 * time.Millisecond
	defaultMax        = 10 * time.Second
	defaultInitial    = 2 * time.Second
	defaultMinSamples = 20
	defaultWindow     = 500
)

// withDefaults returns cfg with its zero fields replaced by their defaults, or an error
// naming the first invalid field.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.Percentile == 0 {
		cfg.Percentile = defaultPercentile
	}
	if !(cfg.Percentile > 0 && cfg.Percentile < 1) { // also rejects NaN
		return cfg, fmt.Errorf("latency: percentile %v is outside (0, 1)", cfg.Percentile)
	}
	if cfg.Multiplier == 0 {
		cfg.Multiplier = defaultMultiplier
	}
	if !(cfg.Multiplier >= 1) || math.IsInf(cfg.Multiplier, 1) {
		return cfg, fmt.Errorf("latency: multiplier %v is below 1 or not finite", cfg.Multiplier)
	}
	if cfg.Min < 0 || cfg.Max < 0 || cfg.Initial < 0 {
		return cfg, fmt.Errorf("latency: min %v, max %v and initial %v must not be negative",
			cfg.Min, cfg.Max, cfg.Initial)
	}
	if cfg.Min == 0 {
		cfg.Min = defaultMin
	}
	if cfg.Max == 0 {
		cfg.Max = defaultMax
	}
	if cfg.Min > cfg.Max {
		return cfg, fmt.Errorf("latency: min %v exceeds max %v", cfg.Min, cfg.Max)
	}
	if cfg.Initial == 0 {
		cfg.Initial = min(max(defaultInitial, cfg.Min), cfg.Max)
	}
	if cfg.Initial < cfg.Min || cfg.Initial > cfg.Max {
		return cfg, fmt.Errorf("latency: initial %v is outside [min %v, max %v]",
			cfg.Initial, cfg.Min, cfg.Max)
	}
	if cfg.MinSamples < 0 {
		return cfg, fmt.Errorf("latency: min samples %d is negative", cfg.MinSamples)
	}
	if cfg.MinSamples == 0 {
		cfg.MinSamples = defaultMinSamples
	}
	if cfg.Window < 0 || cfg.Window == 1 {
		return cfg, fmt.Errorf("latency: window %d is below 2", cfg.Window)
	}
	if cfg.Window == 0 {
		cfg.Window = defaultWindow
	}
	return cfg, nil
}
