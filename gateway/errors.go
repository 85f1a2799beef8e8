package gateway

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// apiError is the body of every error: {"error": {"code": …, "message": …}}. Chat errors
// also carry OpenAI's "type" and "param", so that OpenAI's SDKs read them.
type apiError struct {
	Code    string  `json:"code"`
	Message string  `json:"message"`
	Type    string  `json:"type,omitempty"`
	Param   *string `json:"param,omitempty"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]apiError{"error": {Code: code, Message: msg}})
}

// writeChatError writes an error in OpenAI's shape.
func writeChatError(w http.ResponseWriter, status int, typ, code, msg, param string) {
	e := apiError{Code: code, Message: msg, Type: typ}
	if param != "" {
		e.Param = &param
	}
	writeJSON(w, status, map[string]apiError{"error": e})
}

// internalMessage is all a client learns of a panic; the log has the rest.
const internalMessage = "internal error"

// writeInternal answers a panic with a 500 in the shape of the API called: OpenAI's for chat
// completions.
func writeInternal(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/v1/chat/completions" {
		writeChatError(w, http.StatusInternalServerError, "server_error", "internal", internalMessage, "")
		return
	}
	writeError(w, http.StatusInternalServerError, "internal", internalMessage)
}

func setRetryAfter(w http.ResponseWriter, d time.Duration) {
	secs := int(d.Seconds() + 0.999)
	if secs < 1 {
		secs = 1
	}
	w.Header().Set("Retry-After", strconv.Itoa(secs))
}
