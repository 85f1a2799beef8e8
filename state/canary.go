package state

import "time"

// Canary is a canary release's decision as kept: a task's canary, identified by the
// fingerprint of its settings (a canary of other settings is another one), promoted or
// rolled back.
type Canary struct {
	Task        string    `json:"task"`
	Fingerprint string    `json:"fingerprint"`
	State       string    `json:"state"` // "promoted" or "rolled_back"
	At          time.Time `json:"at"`
	By          string    `json:"by"`
	Reasons     []string  `json:"reasons,omitempty"`
}
