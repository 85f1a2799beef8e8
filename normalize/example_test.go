package normalize_test

import (
	"fmt"

	"github.com/afloat-dev/afloat/normalize"
)

func ExampleContract_Normalize() {
	schema := []byte(`{
	  "type": "object",
	  "properties": {
	    "department": {"enum": ["technical", "billing", "sales", "other", null]},
	    "is_urgent": {"type": "number", "minimum": 0, "maximum": 1}
	  },
	  "required": ["department", "is_urgent"],
	  "additionalProperties": false
	}`)
	c, err := normalize.Compile("triage", schema, normalize.WithSynonyms(map[string][]string{"department": {"категория"}}))
	if err != nil {
		panic(err)
	}
	out := c.Normalize("Вот ваш ответ:\n```json\n{'Категория': 'Technical', 'is_urgent': '0,8',}\n```")
	fmt.Println(string(out.Value), out.Steps)

	out = c.Normalize(`{"department": "technical", "is_urgent": 0.8, "reason": "login fails"}`)
	fmt.Println(out.Err.Stage, out.Err.Details)
	// Output:
	// {"department":"technical","is_urgent":0.8} locate+repair+rename+coerce
	// schema [at /: additional properties 'reason' not allowed]
}
