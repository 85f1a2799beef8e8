package normalize

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/afloat-dev/afloat"
)

// CompileTool compiles a tool's parameter schema into the contract its calls' arguments must
// fit. A tool without parameters takes any JSON object. opts are Compile's (FromClient for a
// client's tool).
func CompileTool(t afloat.Tool, opts ...Option) (*Contract, error) {
	params := bytes.TrimSpace(t.Parameters)
	if len(params) == 0 || bytes.Equal(params, []byte("null")) {
		params = []byte(`{"type": "object"}`)
	}
	c, err := Compile("tool-"+t.Name, params, opts...)
	if err != nil {
		return nil, fmt.Errorf("tool %q: %w", t.Name, err)
	}
	return c, nil
}

// ToolCheck is what CheckToolCalls made of a response's tool calls.
type ToolCheck struct {
	// Calls are the calls with their arguments normalized; nil when Err is set.
	Calls []afloat.ToolCall
	// Steps are the steps that changed any call's arguments.
	Steps Steps
	// Errs holds, per call (same index), why its arguments do not fit, or nil.
	Errs []*afloat.ContractError
	// Err sums Errs up, each detail naming its call, with the stage of the first failing
	// call; nil when every call fits.
	Err *afloat.ContractError
}

// CheckToolCalls runs each call's arguments through the pipeline against its tool's contract
// (tools by name): a call of a tool not in tools, and arguments that do not fit, are contract
// violations, at stage schema for an unknown tool.
func CheckToolCalls(calls []afloat.ToolCall, tools map[string]*Contract) ToolCheck {
	var out ToolCheck
	var fixed []afloat.ToolCall
	for i, call := range calls {
		var cerr *afloat.ContractError
		c, ok := tools[call.Name]
		if !ok {
			cerr = &afloat.ContractError{Stage: StageSchema, Details: []string{fmt.Sprintf("there is no tool %q", call.Name)}}
		} else {
			res := c.Normalize(string(call.Arguments))
			out.Steps |= res.Steps
			cerr = res.Err
			if cerr == nil && !bytes.Equal(res.Value, call.Arguments) {
				if fixed == nil {
					fixed = slices.Clone(calls)
				}
				fixed[i].Arguments = res.Value
			}
		}
		if cerr == nil {
			continue
		}
		if out.Errs == nil {
			out.Errs = make([]*afloat.ContractError, len(calls))
		}
		out.Errs[i] = cerr
		if out.Err == nil {
			out.Err = &afloat.ContractError{Stage: cerr.Stage, Err: cerr}
		}
		for _, d := range cerr.Details {
			out.Err.Details = append(out.Err.Details, fmt.Sprintf("tool call %q (%s): %s", call.Name, call.ID, d))
		}
	}
	if out.Err != nil {
		return out
	}
	out.Calls = calls
	if fixed != nil {
		out.Calls = fixed
	}
	return out
}
