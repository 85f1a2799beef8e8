package prompt_test

import (
	"errors"
	"fmt"

	"github.com/afloat-dev/afloat/prompt"
)

func Example() {
	t, err := prompt.Parse("triage/gigachat-pro.v3.tmpl", `--- system
You triage support tickets. Answer with one JSON object: department, is_urgent, urgency_score.
--- user
Subject: {{.subject}}
Message: {{.message}}
`)
	if err != nil {
		panic(err)
	}
	fmt.Println(t.Version(), t.Fields())

	msgs, err := t.Render(map[string]any{"subject": "Login", "message": "It says --- user\nerror 500"})
	if err != nil {
		panic(err)
	}
	for _, m := range msgs {
		fmt.Printf("%s: %q\n", m.Role, m.Content)
	}

	_, err = t.Render(map[string]any{"subject": "Login"})
	var missing *prompt.MissingInputError
	fmt.Println(errors.As(err, &missing), err)
	// Output:
	// v3 [message subject]
	// system: "You triage support tickets. Answer with one JSON object: department, is_urgent, urgency_score."
	// user: "Subject: Login\nMessage: It says --- user\nerror 500"
	// true prompt triage/gigachat-pro.v3.tmpl: missing input "message"
}
