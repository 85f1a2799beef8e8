package alerts_test

import (
	"fmt"
	"time"

	"github.com/afloat-dev/afloat/alerts"
)

// A receiver checks a webhook by signing the body it got at the header's t with its copy of
// the secret, and comparing (in constant time: crypto/hmac.Equal) with the header.
func ExampleSign() {
	body := []byte(`{"alert":"fallback_share","scope":{"task":"triage"},"state":"firing"}`)
	fmt.Println(alerts.Sign("whsec-3f9a1c7e5b2d", time.Unix(1796032800, 0), body))
	// Output: t=1796032800,v1=ad74e0b43dd87ff5ed1ae464a3c1c763365b7917956660954a3b7c031eae9b6f
}
