package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/afloat-dev/afloat"
)

// apiError is the body of every error of afloat's own API: {"error": {"code": …, "message":
// …}}. The "type" is set on the error events of a stream.
type apiError struct {
	Code    string  `json:"code"`
	Message string  `json:"message"`
	Type    string  `json:"type,omitempty"`
	Param   *string `json:"param,omitempty"`
}

// chatError is an error in OpenAI's shape, {"error": {"message", "type", "param", "code"}},
// every key present (param null when no parameter is at fault), as OpenAI's SDKs read it.
type chatError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    string  `json:"code"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header()["Content-Type"] = headerValue("application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// writeError writes an error in afloat's shape; requestError picks the shape by the path.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]apiError{"error": {Code: code, Message: msg}})
}

// writeChatError writes an error in OpenAI's shape.
func writeChatError(w http.ResponseWriter, status int, typ, code, msg, param string) {
	e := chatError{Code: code, Message: msg, Type: typ}
	if param != "" {
		e.Param = &param
	}
	writeJSON(w, status, map[string]chatError{"error": e})
}

// openAIPath reports whether path belongs to the OpenAI-compatible API, whose every error
// is in OpenAI's shape.
func openAIPath(path string) bool {
	return path == "/v1/chat/completions" || path == "/v1/models" || strings.HasPrefix(path, "/v1/models/")
}

// openAIType is OpenAI's error type for a status.
func openAIType(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status >= 500:
		return "server_error"
	default:
		return "invalid_request_error"
	}
}

// requestError writes an error in the shape of the API called: OpenAI's or Anthropic's, its
// type taken from the status, on the paths compatible with theirs; afloat's elsewhere.
func requestError(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	if anthropicPath(r.URL.Path) {
		writeAnthropicError(w, r, status, anthropicType(status), msg)
		return
	}
	if openAIPath(r.URL.Path) {
		writeChatError(w, status, openAIType(status), code, msg, "")
		return
	}
	writeError(w, status, code, msg)
}

// readJSON checks that the request sends JSON and reads its body (capped by max_body),
// answering what is wrong in the shape of the API called; ok is false when it answered.
func readJSON(w http.ResponseWriter, r *http.Request) (body []byte, ok bool) {
	if !jsonBody(w, r) {
		return nil, false
	}
	body, err := readBody(r)
	if err != nil {
		bodyError(w, r, err)
		return nil, false
	}
	return body, true
}

// presizeMax caps the buffer that readBody takes at once from a body's Content-Length: a
// client that declares a large body and sends it slowly holds no more than this until it does.
const presizeMax = 64 << 10

// readBody reads a body whole, into one buffer the size its Content-Length says when that is
// at most presizeMax: io.ReadAll starts at 512 bytes and doubles, which on an 8 KiB task call
// allocated and copied 20 KB, a fifth of the shed path's bytes.
func readBody(r *http.Request) ([]byte, error) {
	n := r.ContentLength
	if n <= 0 || n > presizeMax {
		return io.ReadAll(r.Body)
	}
	buf := make([]byte, 0, n+1) // the 1: room for the read that finds EOF
	for {
		m, err := r.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		switch {
		case err == io.EOF:
			return buf, nil
		case err != nil:
			return buf, err
		case len(buf) == cap(buf): // longer than it said (a Body set by a caller, not a server's)
			rest, err := io.ReadAll(r.Body)
			return append(buf, rest...), err
		}
	}
}

// bodyError answers a body that could not be read: 413 when it is over the limit.
func bodyError(w http.ResponseWriter, r *http.Request, err error) {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		requestError(w, r, http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("body over %d bytes", mbe.Limit))
		return
	}
	requestError(w, r, http.StatusBadRequest, "bad_body", "could not read the body: "+err.Error())
}

// internalMessage is all a client learns of a panic; the log has the rest.
const internalMessage = "internal error"

// writePanicEvent ends an event stream whose handler panicked with an error event in the
// shape of the API called.
func writePanicEvent(sw *statusWriter, r *http.Request) {
	msg := internalMessage + "; the answer is incomplete"
	if anthropicPath(r.URL.Path) {
		b, _ := json.Marshal(anthropicErrorBody("api_error", msg, afloat.RequestID(r.Context())))
		_, _ = fmt.Fprintf(sw, "event: error\ndata: %s\n\n", b)
	} else {
		b, _ := json.Marshal(map[string]apiError{"error": {Code: "internal", Type: "afloat_stream_error", Message: msg}})
		_, _ = fmt.Fprintf(sw, "data: %s\n\n", b)
	}
	sw.Flush()
}

// writeInternal answers a panic with a 500 in the shape of the API called.
func writeInternal(w http.ResponseWriter, r *http.Request) {
	requestError(w, r, http.StatusInternalServerError, "internal", internalMessage)
}

func setRetryAfter(w http.ResponseWriter, d time.Duration) {
	secs := int(d.Seconds() + 0.999)
	if secs < 1 {
		secs = 1
	}
	w.Header().Set("Retry-After", strconv.Itoa(secs))
}
