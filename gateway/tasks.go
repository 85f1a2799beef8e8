package gateway

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"time"

	fastjson "github.com/segmentio/encoding/json"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/cascade"
	"github.com/afloat-dev/afloat/latency"
	"github.com/afloat-dev/afloat/review"
)

// maxBudgetMS caps a call's own budget at an hour; the task's budget caps it further.
const maxBudgetMS = 3_600_000

// taskRequest is the body of POST /v1/tasks/{task}.
type taskRequest struct {
	Input    map[string]any `json:"input"`
	BudgetMS *int64         `json:"budget_ms,omitempty"`
	// arrived is when the body was read: the budget counts from there, the wait for a turn
	// included.
	arrived time.Time
}

// sum hashes the call as canonical JSON (object keys sorted, no insignificant space, numbers
// as written), so that a retry with an Idempotency-Key whose client spaced or ordered the
// same body otherwise is the same call, and the same body with "budget_ms": null or without
// it too.
func (req *taskRequest) sum() [32]byte {
	canon, err := json.Marshal(req)
	if err != nil { // the values came from JSON: not reached
		panic(fmt.Sprintf("gateway: a decoded task call does not encode: %v", err))
	}
	return sha256.Sum256(canon)
}

// decodeTaskRequest reads a task call's body. Errors are meant for the caller.
//
// A body of fastMin bytes or more goes first to segmentio/encoding's parser (fastDecode), which
// reads it without copying it first: on an 8 KiB ticket 8 µs and 14 KB where encoding/json's
// Decoder takes 62 µs and 41 KB (a fifth of the gateway's CPU under overload went there). A
// smaller body, and one the fast parser is not given or refuses, goes to encoding/json, whose
// verdict and words (taskBodyError) are the contract: FuzzDecodeTaskRequestAsEncodingJSON holds
// the two to the same answers.
func decodeTaskRequest(body []byte) (*taskRequest, error) {
	var req taskRequest
	if len(body) < fastMin || !fastDecode(body, &req) {
		req = taskRequest{}
		if err := decodeTaskRequestStd(body, &req); err != nil {
			return nil, err
		}
	}
	if req.Input == nil {
		return nil, errors.New(`"input" is required and must be an object`)
	}
	if req.BudgetMS != nil && (*req.BudgetMS <= 0 || *req.BudgetMS > maxBudgetMS) {
		return nil, fmt.Errorf(`"budget_ms" must be a number of milliseconds from 1 to %d`, maxBudgetMS)
	}
	return &req, nil
}

const (
	// fastMin is the smallest body given to the fast parser: below about 1 KiB encoding/json
	// is as fast, and allocates less (the fast parser makes each object's map for 64 keys).
	fastMin = 1 << 10
	// fastMaxDepth is the deepest nesting given to the fast parser. It recurses without a
	// bound, and its time grows with the square of the depth (16,000 nested arrays, a 32 KB
	// body, took it 4 s; 2,000,000 overflow the goroutine's stack, which no recover catches),
	// where encoding/json refuses past 10,000 levels at once.
	fastMaxDepth = 64
)

// fastDecode decodes body into req with segmentio/encoding's parser when the body nests no
// deeper than fastMaxDepth; false when it did not (too deep, refused, or not read to its end):
// the caller then asks encoding/json.
func fastDecode(body []byte, req *taskRequest) bool {
	if !nestsWithin(body, fastMaxDepth) {
		return false
	}
	rest, err := fastjson.Parse(body, req, fastjson.UseNumber|fastjson.DisallowUnknownFields)
	return err == nil && len(rest) == 0
}

// nestsWithin reports whether the arrays and objects of a JSON text nest no deeper than max,
// skipping the strings (a bracket in one is no nesting). It reads a text that is not JSON as
// well, for a bound: the parser refuses what is not.
func nestsWithin(b []byte, max int) bool {
	depth := 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			for { // to the string's closing quote: one behind an even number of backslashes
				j := bytes.IndexByte(b[i+1:], '"')
				if j < 0 {
					return true
				}
				i += j + 1
				k := i - 1
				for b[k] == '\\' {
					k--
				}
				if (i-1-k)%2 == 0 {
					break
				}
			}
		case '[', '{':
			if depth++; depth > max {
				return false
			}
		case ']', '}':
			depth--
		}
	}
	return true
}

// decodeTaskRequestStd decodes a task call's body with encoding/json: numbers as written,
// no unknown field, one value.
func decodeTaskRequestStd(body []byte, req *taskRequest) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(req); err != nil {
		return taskBodyError(err)
	}
	if dec.More() {
		return errors.New("invalid JSON: more than one value in the body")
	}
	return nil
}

// taskBodyError says what is wrong with a task call's body in the words of its JSON: which field,
// what was expected, what came (never a Go type name), and, for a field of the input sent at
// the top level, that it belongs inside "input".
func taskBodyError(err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		return errors.New(typeErrorText(te))
	case errors.As(err, &se):
		return fmt.Errorf("invalid JSON at byte %d: %s", se.Offset, strings.TrimPrefix(se.Error(), "json: "))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.TrimPrefix(err.Error(), "json: unknown field ")
		return fmt.Errorf(`unknown field %s: the body is {"input": {...}, "budget_ms": N}, and the task's fields go inside "input"`, name)
	case errors.Is(err, io.EOF):
		return errors.New(`the body is empty: send {"input": {...}}`)
	}
	return fmt.Errorf("invalid JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
}

// typeErrorText says what a JSON value of the wrong type should have been, in the words of
// JSON (never a Go type name): `"budget_ms" must be a whole number, got a number 100.5`.
func typeErrorText(te *json.UnmarshalTypeError) string {
	want := "a " + te.Type.Kind().String()
	switch te.Type.Kind() {
	case reflect.Map, reflect.Struct:
		want = "an object"
	case reflect.Slice, reflect.Array:
		want = "an array"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		want = "a whole number"
	case reflect.Float32, reflect.Float64:
		want = "a number"
	case reflect.Bool:
		want = "true or false"
	}
	if te.Field == "" {
		return fmt.Sprintf("the body must be a JSON object, got %s", article(te.Value))
	}
	return fmt.Sprintf("%q must be %s, got %s", te.Field, want, article(te.Value))
}

// article names a JSON value kind with its article: "a string", "an array".
func article(kind string) string {
	switch kind {
	case "array", "object":
		return "an " + kind
	}
	return "a " + kind
}

func (g *Gateway) task(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("task")
	t, ok := g.served().tasks[name]
	if !ok {
		writeError(w, http.StatusNotFound, "unknown_task", fmt.Sprintf("no task %q", name))
		return
	}
	key := r.Header.Get("Idempotency-Key")
	req, sum, ok := g.readTask(w, r, t, key != "")
	if !ok {
		return
	}
	if key == "" {
		g.runTask(w, r, t, req)
		return
	}
	if len(key) > 255 {
		writeError(w, http.StatusBadRequest, "invalid_idempotency_key", "Idempotency-Key is longer than 255 characters")
		return
	}
	entry, first := g.idem.begin(tenantFrom(r)+"\x00task\x00"+name+"\x00"+key, sum)
	if entry == nil {
		writeError(w, http.StatusUnprocessableEntity, "idempotency_key_reused", "this Idempotency-Key was used with another body")
		return
	}
	if !first {
		select {
		case <-entry.done:
		case <-r.Context().Done():
			return
		}
		if entry.status == 0 {
			writeError(w, http.StatusConflict, "idempotency_retry", "the first call with this Idempotency-Key did not finish; retry")
			return
		}
		for k, v := range entry.header {
			w.Header()[k] = v
		}
		w.Header().Set("Idempotent-Replayed", "true")
		w.WriteHeader(entry.status)
		_, _ = w.Write(entry.payload)
		return
	}
	rec := g.runFirst(entry, r.WithContext(cascade.WithIdempotencyKey(r.Context(), key)), t, req)
	for k, v := range rec.header {
		w.Header()[k] = v
	}
	if rec.status != 0 {
		w.WriteHeader(rec.status)
		_, _ = w.Write(rec.body)
	}
}

// runFirst runs the first call with an Idempotency-Key into a recorder and settles its
// entry with the answer. It settles in a deferred call, so that a panic settles the entry
// too, as the 500 its client gets: that drops the entry, and a retry runs again instead of
// waiting for an answer that never comes. The panic goes on up to recover.
func (g *Gateway) runFirst(entry *idemEntry, r *http.Request, t *cascade.Task, req *taskRequest) *recorder {
	rec := &recorder{header: http.Header{}}
	answered := false
	defer func() {
		settled := rec
		if !answered {
			settled = &recorder{header: http.Header{}}
			writeInternal(settled, r)
		}
		status := settled.status
		if r.Context().Err() != nil {
			status = 0 // the client left: no answer to keep
		}
		g.idem.finish(entry, status, settled.header, settled.body)
	}()
	g.runTask(rec, r, t, req)
	answered = true
	return rec
}

// readTask reads a task call's body and decodes it, and hashes it when withSum (for an
// Idempotency-Key), in a turn of the task's (cascade.Task.Enter), so that while afloat is
// saturated calls are decoded a few at a time and a critical call does not wait behind the
// decoding of all the others. The body is read before the turn: a client slow to send it
// holds no turn. It answers the call itself when it fails: 503 with Retry-After when no turn
// came, 4xx for a bad body.
func (g *Gateway) readTask(w http.ResponseWriter, r *http.Request, t *cascade.Task, withSum bool) (req *taskRequest, sum [32]byte, ok bool) {
	body, ok := readJSON(w, r)
	if !ok {
		return nil, sum, false
	}
	arrived := g.clock.Now()
	leave, ok := t.Enter(r.Context())
	if !ok {
		if r.Context().Err() == nil { // else the client left: nobody reads an answer
			setRetryAfter(w, time.Second)
			writeError(w, http.StatusServiceUnavailable, "overloaded", "afloat is overloaded and did not run the call; retry in a second")
		}
		return nil, sum, false
	}
	defer leave()
	req, err := decodeTaskRequest(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return nil, sum, false
	}
	if withSum {
		sum = req.sum()
	}
	req.arrived = arrived
	return req, sum, true
}

// runTask runs one task call and writes the envelope with the status of its policy. The
// call's budget (the task's, or budget_ms when that is shorter) counts from its arrival: the
// wait for a turn (readTask) is part of it.
func (g *Gateway) runTask(w http.ResponseWriter, r *http.Request, t *cascade.Task, req *taskRequest) {
	budget := t.Budget()
	if req.BudgetMS != nil {
		budget = min(budget, time.Duration(*req.BudgetMS)*time.Millisecond)
	}
	if !req.arrived.IsZero() {
		budget -= g.clock.Since(req.arrived)
	}
	ctx, cancel := latency.WithBudget(r.Context(), g.clock, budget)
	defer cancel()
	res, err := t.RunJSON(ctx, afloat.Input(req.Input))
	noteTask(ctx, t.Name(), &res)
	var ie *cascade.InputError
	switch {
	case errors.As(err, &ie):
		writeError(w, http.StatusBadRequest, "invalid_input", ie.Error())
	case errors.Is(err, afloat.ErrBlocked):
		setRetryAfter(w, 30*time.Second)
		writeError(w, http.StatusServiceUnavailable, "blocked",
			fmt.Sprintf("task %s is unavailable and fails closed: no model could answer (reason %s); retry later", t.Name(), res.Reason))
	case errors.Is(err, review.ErrIdempotencyMismatch):
		writeError(w, http.StatusUnprocessableEntity, "idempotency_key_reused", "this Idempotency-Key was used with another body")
	case errors.Is(err, afloat.ErrReviewUnavailable):
		setRetryAfter(w, 30*time.Second) // the engine logged the store's failure
		writeError(w, http.StatusServiceUnavailable, "review_unavailable",
			fmt.Sprintf("task %s needs human review but the review queue cannot take the item; it was not queued, retry later", t.Name()))
	case err != nil && r.Context().Err() != nil:
		// The client left; nobody reads an answer.
	case err != nil:
		g.log.ErrorContext(ctx, "task failed", "task", t.Name(), "err", err)
		writeError(w, http.StatusInternalServerError, "internal", "the task failed: "+err.Error())
	case res.Source == afloat.SourceHuman:
		g.logDegraded(r, t.Name(), res.Attempts)
		res.Attempts = publicAttempts(res.Attempts)
		if res.Replayed { // the key's item, from the review store (its first answer)
			w.Header().Set("Idempotent-Replayed", "true")
		}
		w.Header().Set("Location", "/v1/reviews/"+res.ReviewID)
		writeJSON(w, http.StatusAccepted, humanEnvelope{Result: res, StatusURL: "/v1/reviews/" + res.ReviewID})
	default:
		if res.Degraded {
			g.logDegraded(r, t.Name(), res.Attempts)
		}
		res.Attempts = publicAttempts(res.Attempts)
		writeJSON(w, http.StatusOK, res)
	}
}

// publicAttempts returns the attempts without their error texts: those name internal hosts
// and quote upstreams, which is the operators' business (logs, review items), not a
// tenant's.
func publicAttempts(in []afloat.Attempt) []afloat.Attempt {
	out := make([]afloat.Attempt, len(in))
	for i, a := range in {
		a.Error = ""
		out[i] = a
	}
	return out
}

// logDegraded logs why a call did not get tier 0's answer, attempt by attempt.
func (g *Gateway) logDegraded(r *http.Request, scope string, attempts []afloat.Attempt) {
	for _, a := range attempts {
		if a.Outcome != afloat.OutcomeOK {
			g.log.LogAttrs(r.Context(), slog.LevelInfo, "attempt failed", slog.String("task", scope),
				slog.String("provider", a.Provider), slog.String("outcome", string(a.Outcome)), slog.String("error", a.Error))
		}
	}
}

// humanEnvelope adds the review's status URL to a 202 envelope.
type humanEnvelope struct {
	afloat.Result[json.RawMessage]
	StatusURL string
}

func (h humanEnvelope) MarshalJSON() ([]byte, error) {
	b, err := h.Result.MarshalJSON()
	if err != nil {
		return nil, err
	}
	extra, _ := json.Marshal(h.StatusURL)
	return append(append(append(b[:len(b)-1:len(b)-1], `,"status_url":`...), extra...), '}'), nil
}
