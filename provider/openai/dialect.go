package openai

import "github.com/afloat-dev/afloat"

// Dialects of Config.Dialect: the OpenAI-compatible servers whose quirks the adapter
// renders around.
const (
	// DialectOpenAI is the API as OpenAI documents it; "" means it too.
	DialectOpenAI = "openai"
	// DialectVLLM is vLLM, which takes the documented form (auto tool choice needs the
	// server's --enable-auto-tool-choice and --tool-call-parser).
	DialectVLLM = "vllm"
	// DialectLlamaCpp is llama.cpp's llama-server: a json_schema response format is sent as
	// {"type":"json_object","schema":…}, the one form every build constrains.
	DialectLlamaCpp = "llamacpp"
	// DialectOllama is Ollama's /v1, which has no tool_choice: it is left out; "none" sends
	// no tools, a named tool sends that tool alone, and "required" offers the tools without
	// forcing one (the model may answer in text).
	DialectOllama = "ollama"
	// DialectYandex is Yandex's OpenAI-compatible endpoint, whose tool_choice takes only
	// auto and none: a named tool is sent alone with auto, and required becomes auto. Its
	// folder goes in Config.Headers as "OpenAI-Project".
	DialectYandex = "yandex"
)

// knownDialect reports whether d names a dialect ("" included).
func knownDialect(d string) bool {
	switch d {
	case "", DialectOpenAI, DialectVLLM, DialectLlamaCpp, DialectOllama, DialectYandex:
		return true
	}
	return false
}

// adaptToolChoice returns the tools and tool choice to send to a server of the dialect.
// A choice it cannot place (an unknown mode, a named tool without a name) is returned as
// it is, for the encoder to refuse.
func adaptToolChoice(tools []afloat.Tool, tc *afloat.ToolChoice, dialect string) ([]afloat.Tool, *afloat.ToolChoice) {
	named := func() ([]afloat.Tool, bool) {
		for _, t := range tools {
			if t.Name == tc.Name {
				return []afloat.Tool{t}, true
			}
		}
		return nil, false
	}
	auto := &afloat.ToolChoice{Mode: "auto"}
	switch dialect {
	case DialectOllama:
		switch tc.Mode {
		case "", "auto", "required":
			return tools, nil
		case "none":
			return nil, nil
		case "tool":
			if only, ok := named(); ok {
				return only, nil
			}
		}
	case DialectYandex:
		switch tc.Mode {
		case "required":
			return tools, auto
		case "tool":
			if only, ok := named(); ok {
				return only, auto
			}
		}
	}
	return tools, tc
}
