package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/afloat-dev/afloat/review"
)

// The review queue of the console: the unanswered items, live (GET /ui/events), and each
// item's page with its input, its failed attempts, and the forms to claim, resolve (a form
// generated from the task's schema) or reject it. Operators and the admin see it.

// queueRow is one unanswered item of the queue.
type queueRow struct {
	Item       *review.Item
	Input      string
	Failed     int
	ExpectedBy time.Time
}

// queueLimit bounds each status's items on the queue page.
const queueLimit = 200

func (c *console) queue(r *http.Request) ([]queueRow, error) {
	var rows []queueRow
	for _, st := range []review.Status{review.StatusPending, review.StatusClaimed} {
		page, err := c.g.cfg.Review.List(r.Context(), review.Filter{Status: st, Limit: queueLimit})
		if err != nil {
			return nil, err
		}
		for _, it := range page.Items {
			in := string(it.Input)
			if len(in) > 160 {
				in = in[:160] + "…"
			}
			rows = append(rows, queueRow{Item: it, Input: in, Failed: len(it.Attempts), ExpectedBy: c.expectedBy(it)})
		}
	}
	return rows, nil
}

// expectedBy is when an operator is due to answer it: its task's review_sla after it was
// queued; zero when this gateway does not know the task.
func (c *console) expectedBy(it *review.Item) time.Time {
	t, ok := c.g.served().tasks[it.Task]
	if !ok {
		return time.Time{}
	}
	return it.CreatedAt.Add(t.ReviewSLA()).UTC()
}

func (c *console) reviewsPage(w http.ResponseWriter, r *http.Request) {
	s := sessionFrom(r)
	if c.g.cfg.Review == nil {
		c.message(w, r, s, http.StatusNotFound, "No review queue", "This gateway has no review store.")
		return
	}
	rows, err := c.queue(r)
	data := map[string]any{"Queue": rows, "Now": c.g.clock.Now()}
	status := http.StatusOK
	if err != nil {
		c.g.log.ErrorContext(r.Context(), "console: review store failed", "err", err)
		data["Error"], status = "The review store cannot answer now; retry later.", http.StatusServiceUnavailable
	}
	if r.URL.Query().Get("fragment") == "queue" {
		var buf bytes.Buffer
		if err := c.pages["reviews"].ExecuteTemplate(&buf, "queue", page{Session: s, Data: data}); err != nil {
			writeInternal(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(status)
		_, _ = w.Write(buf.Bytes())
		return
	}
	c.render(w, r, s, status, "reviews", data)
}

// reviewForm is what the item page shows: the item, and the resolve form as posted.
type reviewForm struct {
	Item       *review.Item
	ExpectedBy time.Time
	Fields     []formField
	Flat       bool
	JSON       string // the answer as JSON, for a schema that is not flat
	JSONError  string
	Errors     []string // what names no field
	Reason     string
	Done       string
	Mine       bool
}

func (c *console) reviewPage(w http.ResponseWriter, r *http.Request) {
	c.showItem(w, r, http.StatusOK, nil)
}

// showItem renders item id; form, when set, is a resolve or reject that failed.
func (c *console) showItem(w http.ResponseWriter, r *http.Request, status int, form *reviewForm) {
	s := sessionFrom(r)
	if c.g.cfg.Review == nil {
		c.message(w, r, s, http.StatusNotFound, "No review queue", "This gateway has no review store.")
		return
	}
	id := r.PathValue("id")
	it, err := c.g.cfg.Review.Lookup(r.Context(), id)
	switch {
	case errors.Is(err, review.ErrNotFound):
		c.message(w, r, s, http.StatusNotFound, "No such review", "There is no review "+id+".")
		return
	case err != nil:
		c.g.log.ErrorContext(r.Context(), "console: review store failed", "err", err)
		c.message(w, r, s, http.StatusServiceUnavailable, "Review store unavailable", "The review store cannot answer now; retry later.")
		return
	}
	if form == nil {
		form = &reviewForm{Done: r.URL.Query().Get("done")}
		if t, ok := c.g.served().tasks[it.Task]; ok {
			form.Fields, form.Flat = schemaForm(t.Contract().Schema())
		}
	}
	form.Item, form.ExpectedBy = it, c.expectedBy(it)
	form.Mine = it.Status == review.StatusClaimed && it.Operator == s.name
	c.render(w, r, s, status, "review", form)
}

func (c *console) changeReview(w http.ResponseWriter, r *http.Request) {
	s := sessionFrom(r)
	if c.g.cfg.Review == nil {
		c.message(w, r, s, http.StatusNotFound, "No review queue", "This gateway has no review store.")
		return
	}
	id := r.PathValue("id")
	action := r.PostFormValue("action")
	var ans apiAnswer
	form := &reviewForm{}
	detail := ""
	switch action {
	case "claim":
		ans = c.callAPI(r, c.g.claimReview, http.MethodPost, nil, "id", id)
	case "release":
		ans = c.callAPI(r, c.g.releaseReview, http.MethodPost, nil, "id", id)
	case "reject":
		form.Reason = r.PostFormValue("reason")
		ans = c.callAPI(r, c.g.rejectReview, http.MethodPost, map[string]string{"reason": form.Reason}, "id", id)
		detail = form.Reason
	case "resolve":
		it, err := c.g.cfg.Review.Lookup(r.Context(), id)
		if err != nil {
			c.showItem(w, r, http.StatusOK, nil) // it says what is wrong
			return
		}
		var result json.RawMessage
		if t, ok := c.g.served().tasks[it.Task]; ok {
			form.Fields, form.Flat = schemaForm(t.Contract().Schema())
		}
		if form.Flat {
			var good bool
			result, good = formResult(form.Fields, r.PostFormValue)
			if !good {
				form.Errors = []string{"Some fields are not of their type: see below."}
				c.showItem(w, r, http.StatusBadRequest, form)
				return
			}
		} else {
			form.JSON = r.PostFormValue(jsonField)
			if !json.Valid([]byte(form.JSON)) {
				form.JSONError = "not valid JSON"
				c.showItem(w, r, http.StatusBadRequest, form)
				return
			}
			result = json.RawMessage(form.JSON)
		}
		ans = c.callAPI(r, c.g.resolveReview, http.MethodPost, map[string]json.RawMessage{"result": result}, "id", id)
		detail = string(result)
		if ans.status == http.StatusBadRequest {
			msg, details := ans.apiError()
			if form.Flat {
				form.Errors = fieldErrors(form.Fields, details)
			} else {
				form.JSONError = strings.Join(details, "; ")
			}
			form.Errors = append([]string{msg + "."}, form.Errors...)
			c.showItem(w, r, http.StatusBadRequest, form)
			return
		}
	default:
		c.message(w, r, s, http.StatusBadRequest, "Unknown action", fmt.Sprintf("%q is no action on a review.", action))
		return
	}
	if !ans.ok() {
		msg, details := ans.apiError()
		form.Errors = append([]string{msg}, details...)
		if action != "resolve" {
			form = &reviewForm{Errors: form.Errors, Reason: form.Reason}
			if it, err := c.g.cfg.Review.Lookup(r.Context(), id); err == nil {
				if t, ok := c.g.served().tasks[it.Task]; ok {
					form.Fields, form.Flat = schemaForm(t.Contract().Schema())
				}
			}
		}
		c.showItem(w, r, ans.status, form)
		return
	}
	c.record(r, "review."+action, id, detail)
	http.Redirect(w, r, "/ui/reviews/"+pathEscape(id)+"?done="+action, http.StatusSeeOther)
}

// events streams an event "queue" whenever the unanswered items change: the store's Stats
// are read every second and compared with the last sent.
func (c *console) events(w http.ResponseWriter, r *http.Request) {
	if c.g.cfg.Review == nil {
		http.Error(w, "no review store", http.StatusNotFound)
		return
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	_, _ = fmt.Fprint(w, "retry: 2000\n\n")
	fl.Flush()
	tick := c.g.clock.NewTicker(time.Second)
	defer tick.Stop()
	last := ""
	for n := 0; ; n++ {
		if c.sessionOf(r) == nil {
			_, _ = fmt.Fprint(w, "event: signed_out\ndata: {}\n\n")
			fl.Flush()
			return
		}
		if st, err := c.g.cfg.Review.Stats(r.Context()); err == nil {
			b, _ := json.Marshal(st) // map keys sorted: equal stats, equal bytes
			if cur := string(b); cur != last {
				if _, err := fmt.Fprintf(w, "event: queue\ndata: %s\n\n", b); err != nil {
					return
				}
				fl.Flush()
				last = cur
			}
		}
		if n%15 == 14 {
			if _, err := fmt.Fprint(w, ": ping\n\n"); err != nil {
				return
			}
			fl.Flush()
		}
		select {
		case <-r.Context().Done():
			return
		case <-tick.Chan():
		}
	}
}
