package config_test

import (
	"errors"
	"fmt"

	"github.com/afloat-dev/afloat/config"
)

// ExampleParse shows that one parse reports every problem, each with its key path and line.
func ExampleParse() {
	text := `
providers:
  primary: {type: sim}
tasks:
  moderation:
    criticality: critical
    on_exhausted: heuristic
    budget: 3
    schema: schemas/moderation.json
    cascade: [{provider: primary, prompt: prompts/moderation/primary.v1.tmpl}]
`
	_, err := config.Parse([]byte(text), "/etc/afloat", nil)
	var errs config.Errors
	if errors.As(err, &errs) {
		for _, e := range errs {
			fmt.Printf("%d %s\n", e.Line, e.Path)
		}
	}
	// Output:
	// 7 tasks.moderation.on_exhausted
	// 8 tasks.moderation.budget
}
