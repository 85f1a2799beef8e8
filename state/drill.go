package state

import "time"

// Drill is the record of one `afloat drill`: what it exercised and its verdict.
type Drill struct {
	// Scope is "task:NAME" or "route:NAME".
	Scope    string `json:"scope"`
	Provider string `json:"provider"`
	Mode     string `json:"mode"`
	Passed   bool   `json:"passed"`
	// Failed names the checks that failed.
	Failed     []string  `json:"failed,omitempty"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
}

// Drills are a scope's drills as kept: the last one, and the last that passed.
type Drills struct {
	Last       *Drill `json:"last"`
	LastPassed *Drill `json:"last_passed"`
}

// Add returns ds with d recorded: its last drill, and its last passing one when d passed.
func (ds Drills) Add(d Drill) Drills {
	ds.Last = &d
	if d.Passed {
		ds.LastPassed = &d
	}
	return ds
}
