package normalize

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/kaptinlin/jsonrepair"
)

// maxRepair bounds the span repair takes on.
const maxRepair = 32 << 10

// repair mends a span that does not parse with github.com/kaptinlin/jsonrepair: trailing
// commas, single and typographic quotes, unquoted keys, comments, Python literals (None, True,
// False), missing closers of a truncated answer. The span holds one value (Locate cut it at its
// closer), so the library's joining of several values into an array never applies. A result
// that is still not JSON, and a panic of the library on hostile input, are errors. So is a
// span over maxRepair bytes: the library's time grows with the square of the length (a broken
// 40 KB answer takes tens of milliseconds, 160 KB over a second), and a call must not spend
// its budget there; such an answer is re-asked instead.
func repair(span string) (out string, err error) {
	if len(span) > maxRepair {
		return "", fmt.Errorf("the answer is too long to repair (%d bytes, at most %d)", len(span), maxRepair)
	}
	defer func() {
		if r := recover(); r != nil {
			out, err = "", fmt.Errorf("repair failed: %v", r)
		}
	}()
	out, err = jsonrepair.Repair(span)
	if err != nil {
		return "", err
	}
	if !json.Valid([]byte(out)) {
		return "", errors.New("the repaired text is still not JSON")
	}
	return out, nil
}
