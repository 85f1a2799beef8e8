package afloat

import (
	"encoding/json"
	"strconv"
)

// Roles of a message, as the canonical form names them. Adapters map them to their provider's
// words (Yandex "text", GigaChat "function", Anthropic content blocks).
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one turn of a conversation in canonical form.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	// ToolCalls are the calls an assistant turn asked for.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID links a tool turn to the call it answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// Name is the tool's name on a tool turn (providers without call ids match by name).
	Name string `json:"name,omitempty"`
}

// Tool is a function the model may call, written once and rendered by each adapter.
type Tool struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Parameters is a JSON Schema object describing the arguments.
	Parameters json.RawMessage `json:"parameters,omitempty"`
}

// ToolCall is a call the model made. Arguments is always a JSON object, whatever the
// provider's wire form (a string for OpenAI, an object for GigaChat and Yandex).
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// ToolChoice says whether and which tool the model must call.
type ToolChoice struct {
	// Mode is "auto", "none", "required" or "tool" (then Name names it).
	Mode string `json:"mode"`
	Name string `json:"name,omitempty"`
}

// ResponseFormat asks for structured output.
type ResponseFormat struct {
	// Type is "text", "json_object" or "json_schema".
	Type   string          `json:"type"`
	Name   string          `json:"name,omitempty"`
	Schema json.RawMessage `json:"schema,omitempty"`
	Strict bool            `json:"strict,omitempty"`
}

// Request is one model call in canonical form.
type Request struct {
	// Model overrides the adapter's configured model; empty uses the configured one.
	Model          string          `json:"model,omitempty"`
	Messages       []Message       `json:"messages"`
	Tools          []Tool          `json:"tools,omitempty"`
	ToolChoice     *ToolChoice     `json:"tool_choice,omitempty"`
	ResponseFormat *ResponseFormat `json:"response_format,omitempty"`
	// MaxTokens caps the answer; 0 leaves it to the provider.
	MaxTokens int `json:"max_tokens,omitempty"`
	// MaxTokensParam is the name the client gave MaxTokens, "max_tokens" or
	// "max_completion_tokens" ("" means max_tokens). An adapter for OpenAI itself sends the
	// cap under the client's name, since its reasoning models refuse max_tokens; adapters of
	// servers that know only max_tokens send that.
	MaxTokensParam string `json:"max_tokens_param,omitempty"`
	// Temperature is nil to leave it to the provider.
	Temperature *float64 `json:"temperature,omitempty"`
	// Task names the task or route the call serves, for adapters that simulate or log.
	Task string `json:"-"`
	// Continue says that the last message is an assistant message holding the start of the
	// answer (an answer cut on another provider), which the provider must continue rather
	// than answer anew: an assistant prefill. Only providers whose continuation is "prefill"
	// receive it; an adapter that cannot continue returns a Contract error.
	Continue bool `json:"-"`
}

// Usage counts the tokens of one call or, in an envelope, of every attempt, with their cost.
type Usage struct {
	InputTokens  int     `json:"input_tokens"`
	OutputTokens int     `json:"output_tokens"`
	Cost         float64 `json:"cost"`
	Currency     string  `json:"currency,omitempty"`
}

// MixedCurrency is the Currency of a sum of costs in different currencies; its Cost is
// then the plain sum of the amounts, which means little: read the per-provider metrics.
const MixedCurrency = "mixed"

// Add returns the sum of u and v.
func (u Usage) Add(v Usage) Usage {
	u.InputTokens += v.InputTokens
	u.OutputTokens += v.OutputTokens
	u.Cost += v.Cost
	switch {
	case u.Currency == "":
		u.Currency = v.Currency
	case v.Currency != "" && v.Currency != u.Currency:
		u.Currency = MixedCurrency
	}
	return u
}

// MarshalJSON writes the cost rounded by RoundCost: a sum of prices per token carries binary
// noise (0.000015200000000000002) that no reader of an envelope wants.
func (u Usage) MarshalJSON() ([]byte, error) {
	type plain Usage
	u.Cost = RoundCost(u.Cost)
	return json.Marshal(plain(u))
}

// RoundCost rounds a cost to 12 significant digits, past which a float64 sum of prices is
// noise.
func RoundCost(c float64) float64 {
	rounded, err := strconv.ParseFloat(strconv.FormatFloat(c, 'g', 12, 64), 64)
	if err != nil { // not reached: FormatFloat writes what ParseFloat reads
		return c
	}
	return rounded
}

// Response is a provider's answer in canonical form.
type Response struct {
	Content   string     `json:"content"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// FinishReason is the provider's word, mapped to OpenAI's vocabulary where one exists
	// ("stop", "length", "tool_calls", "content_filter").
	FinishReason string `json:"finish_reason,omitempty"`
	Model        string `json:"model,omitempty"`
	Usage        Usage  `json:"usage"`
}
