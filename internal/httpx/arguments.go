package httpx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// ArgumentsError says that a model's tool arguments are not a JSON object: the answer breaks
// the contract, the provider is healthy. DecodeError classifies it as Contract.
type ArgumentsError struct {
	// Tool is the name of the tool the model called.
	Tool string
	// Err says what is wrong with the arguments.
	Err error
}

func (e *ArgumentsError) Error() string {
	return fmt.Sprintf("tool %q: arguments are not a json object: %v", e.Tool, e.Err)
}

func (e *ArgumentsError) Unwrap() error { return e.Err }

// ObjectArguments checks that wire arguments are a JSON object, sent as one or as a string
// holding one; empty, null or a blank string reads as {} (a call without arguments). The
// object is returned as sent, not copied.
func ObjectArguments(raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return json.RawMessage("{}"), nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		raw = bytes.TrimSpace([]byte(s))
		if len(raw) == 0 {
			return json.RawMessage("{}"), nil
		}
	}
	if raw[0] != '{' {
		return nil, errors.New("not an object")
	}
	if !json.Valid(raw) {
		return nil, errors.New("invalid json")
	}
	return raw, nil
}

// AppendArguments adds one streamed fragment of tool arguments to dst: a JSON string on the
// wire is added as its text, anything else (an object sent whole) as it is, and null adds
// nothing.
func AppendArguments(dst []byte, raw json.RawMessage) []byte {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return append(dst, s...)
		}
	}
	if string(raw) == "null" {
		return dst
	}
	return append(dst, raw...)
}
