package sim

import (
	"errors"
	"math/rand/v2"
	"strings"
	"unicode"

	"github.com/afloat-dev/afloat"
)

// Continuation returns "prefill", for the config layer: the simulated provider continues an
// answer cut on another provider (afloat.Request's Continue).
func (p *Provider) Continuation() string { return "prefill" }

// continueAnswer builds the answer to a request with Continue: what the provider adds to the
// partial answer in the last (assistant) message. A partial JSON document is completed into
// a valid one (open strings, literals, keys and containers closed, a missing value as null);
// a partial text gets a closing clause. The rest of a whole JSON document is empty. Its error
// is the request's fault.
func continueAnswer(req *afloat.Request, r *rand.Rand) (*afloat.Response, error) {
	if len(req.Messages) == 0 {
		return nil, errors.New("continue: the request has no messages")
	}
	last := req.Messages[len(req.Messages)-1]
	switch {
	case last.Role != afloat.RoleAssistant:
		return nil, errors.New("continue: the last message is not an assistant message")
	case len(last.ToolCalls) > 0:
		return nil, errors.New("continue: the last message holds tool calls, not text to continue")
	}
	resp := &afloat.Response{FinishReason: "stop", Model: model(req)}
	partial := last.Content
	if t := strings.TrimLeftFunc(partial, unicode.IsSpace); t != "" && (t[0] == '{' || t[0] == '[') {
		resp.Content = closeJSON(t)
	} else {
		resp.Content = closeText(partial, r)
	}
	resp.Usage = usage(req, resp)
	return resp, nil
}

// textEndings close a partial text answer.
var textEndings = []string{
	"and that completes the simulated answer.",
	"which is all the simulated model has to add.",
}

func closeText(partial string, r *rand.Rand) string {
	end := textEndings[r.IntN(len(textEndings))]
	trimmed := strings.TrimRightFunc(partial, unicode.IsSpace)
	switch {
	case trimmed == "":
		return "This answer comes from a simulated model, " + end
	case strings.ContainsAny(trimmed[len(trimmed)-1:], ".!?…"):
		end = "This completes the simulated answer."
	}
	if len(trimmed) == len(partial) {
		end = " " + end
	}
	return end
}

// closeJSON returns what completes the JSON document whose start is doc. It reads doc as a
// JSON scanner would and closes whatever is open, inside out: an escape, a string (a key then
// gets ":null"), a literal or number, a value still expected after ":" or "," (null, or for
// an object after a comma a "_":null member), and the containers.
func closeJSON(doc string) string {
	type frame struct {
		object bool
		// state: 'k' a key is expected (after "{" or ","), ':' a colon, 'v' a value, ','
		// a comma or the close.
		state byte
		comma bool // the key or value expected follows a comma
	}
	var (
		stack   []frame
		inStr   bool
		esc     int // 0 none, 1 after "\", 2–5 the hex digits of \u still due + 1
		scalar  []byte
		topDone bool
	)
	top := func() *frame {
		if len(stack) == 0 {
			return nil
		}
		return &stack[len(stack)-1]
	}
	valueDone := func() {
		if f := top(); f != nil {
			f.state, f.comma = ',', false
		} else {
			topDone = true
		}
	}
	for i := 0; i < len(doc); i++ {
		c := doc[i]
		if inStr {
			switch {
			case esc == 1 && c == 'u':
				esc = 5
			case esc == 1:
				esc = 0
			case esc > 1:
				if esc--; esc == 1 {
					esc = 0
				}
			case c == '\\':
				esc = 1
			case c == '"':
				inStr = false
				if f := top(); f != nil && f.object && f.state == 'k' {
					f.state = ':'
				} else {
					valueDone()
				}
			}
			continue
		}
		if scalar != nil {
			if strings.IndexByte("+-.0123456789eEtruefalsn", c) >= 0 {
				scalar = append(scalar, c)
				continue
			}
			scalar = nil
			valueDone()
		}
		switch {
		case c == '{' || c == '[':
			if f := top(); f != nil {
				f.state, f.comma = ',', false // its value is this container
			}
			f := frame{object: c == '{', state: 'v'}
			if f.object {
				f.state = 'k'
			}
			stack = append(stack, f)
		case c == '}' || c == ']':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
			valueDone()
		case c == '"':
			inStr = true
		case c == ':':
			if f := top(); f != nil {
				f.state = 'v'
			}
		case c == ',':
			if f := top(); f != nil {
				f.state, f.comma = 'v', true
				if f.object {
					f.state = 'k'
				}
			}
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
		default:
			scalar = []byte{c}
		}
	}
	var out strings.Builder
	switch {
	case inStr:
		if esc == 1 {
			out.WriteByte('\\')
		}
		for ; esc > 1; esc-- {
			out.WriteByte('0')
		}
		out.WriteByte('"')
		if f := top(); f != nil && f.object && f.state == 'k' {
			f.state = ':'
		} else if f != nil {
			f.state = ','
		}
	case scalar != nil:
		out.WriteString(finishScalar(string(scalar)))
		if f := top(); f != nil {
			f.state = ','
		}
	}
	if topDone && len(stack) == 0 {
		return out.String()
	}
	for i := len(stack) - 1; i >= 0; i-- {
		f := stack[i]
		switch {
		case f.state == ':':
			out.WriteString(":null")
		case f.state == 'v' && (f.comma || f.object):
			out.WriteString("null")
		case f.state == 'k' && f.comma:
			out.WriteString(`"_":null`)
		}
		if f.object {
			out.WriteByte('}')
		} else {
			out.WriteByte(']')
		}
	}
	return out.String()
}

// finishScalar returns what completes a literal or number cut short ("tr", "-", "1.").
func finishScalar(s string) string {
	for _, lit := range []string{"true", "false", "null"} {
		if strings.HasPrefix(lit, s) {
			return lit[len(s):]
		}
	}
	if strings.ContainsAny(s[len(s)-1:], "+-.eE") {
		return "0"
	}
	return ""
}
