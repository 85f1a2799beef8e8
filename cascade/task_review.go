package cascade

import "time"

// ReviewSLA is the time by which an operator is due to answer an item the task queued for
// review (TaskConfig.ReviewSLA, 30m when it was 0).
func (t *Task) ReviewSLA() time.Duration { return t.reviewSLA }
