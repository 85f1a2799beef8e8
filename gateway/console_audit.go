package gateway

import (
	"net/http"
	"sync"
	"time"
)

// auditSize is how many changes the audit log keeps.
const auditSize = 500

// auditEntry is one change made through the console: who made it, when, and what it was.
type auditEntry struct {
	At     time.Time `json:"at"`
	Who    string    `json:"who"`
	Action string    `json:"action"`
	Target string    `json:"target"`
	Detail string    `json:"detail,omitempty"`
}

// auditLog is a ring of the latest changes made through the console, in memory: a restart
// forgets it, and each replica keeps its own. The admin API's own calls are in the
// gateway's log lines, not here. It is safe for concurrent use.
type auditLog struct {
	mu      sync.Mutex
	entries []auditEntry // oldest first, at most size
	size    int
}

func newAuditLog(size int) *auditLog { return &auditLog{size: size} }

func (a *auditLog) add(e auditEntry) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.entries) == a.size {
		copy(a.entries, a.entries[1:])
		a.entries = a.entries[:a.size-1]
	}
	a.entries = append(a.entries, e)
}

// latest returns up to n entries, newest first.
func (a *auditLog) latest(n int) []auditEntry {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]auditEntry, 0, min(n, len(a.entries)))
	for i := len(a.entries) - 1; i >= 0 && len(out) < n; i-- {
		out = append(out, a.entries[i])
	}
	return out
}

// record adds a change the request's session made.
func (c *console) record(r *http.Request, action, target, detail string) {
	s := sessionFrom(r)
	c.audit.add(auditEntry{At: c.g.clock.Now().UTC(), Who: s.name, Action: action, Target: target, Detail: detail})
	c.g.log.InfoContext(r.Context(), "console change", "operator", s.name, "action", action, "target", target, "detail", detail)
}

// getAudit answers GET /admin/audit: {"entries": [...]}, newest first.
func (c *console) getAudit(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"entries": c.audit.latest(auditSize)})
}
