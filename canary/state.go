package canary

import "strconv"

// Arm is the side of a canary that a call goes to.
type Arm int

const (
	// Incumbent is what the tier runs today: the current prompt version or model.
	Incumbent Arm = iota
	// Candidate is what the canary tries: a new prompt version, or another model.
	Candidate
)

// String returns "incumbent" or "candidate", or "Arm(n)" for any other value.
func (a Arm) String() string {
	switch a {
	case Incumbent:
		return "incumbent"
	case Candidate:
		return "candidate"
	}
	return "Arm(" + strconv.Itoa(int(a)) + ")"
}

// State is where a canary is in its life: Running or Pinned until it is decided, then
// Promoted or RolledBack for good.
type State string

const (
	// Running sends the candidate its share and decides by itself once due.
	Running State = "running"
	// Pinned sends the candidate its share, as Running does, but decides nothing by itself:
	// an operator froze it to look closer.
	Pinned State = "pinned"
	// Promoted sends every call to the candidate.
	Promoted State = "promoted"
	// RolledBack sends every call to the incumbent.
	RolledBack State = "rolled_back"
)

// decided reports whether s is final.
func (s State) decided() bool { return s == Promoted || s == RolledBack }
