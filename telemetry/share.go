package telemetry

// ShareSources are the values of afloat_source_share's source label, in order: the
// envelope's sources (shared/DESIGN.md §3), with a model's answer split in two, so that the
// backup's share and the heuristic's are read apart:
//
//   - "model": tier 0 answered, whole (not degraded: the happy path);
//   - "model_degraded": a model answered, degraded: a lower tier (the backup, the emergency
//     tier), or a stream cut after its first chunk;
//   - "cache": an earlier answer of a model from the task's answer cache: degraded when every
//     tier failed; with serve: always_fresh, a hit before any tier was asked, not degraded;
//   - "heuristic", "unavailable", "human": the on_exhausted policies (and the kill switch's).
//
// Over one task's window they add up to 1 (0 each before any call), and every source but
// "model" adds up to afloat_fallback_share, less the cache's fresh hits (not degraded).
func ShareSources() []string {
	return []string{"model", "model_degraded", "cache", "heuristic", "unavailable", "human"}
}
