package cascade

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/latency"
	"github.com/afloat-dev/afloat/provider/openai"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestTheTransportTellsWhenTheRequestReachedTheNetwork: with the real OpenAI adapter and
// net/http's transport, an attempt whose dial never began (a dialer that waits, as an
// overloaded gateway's did) is not blamed, and the breaker stays closed; a server that takes
// the connection and never answers is to blame, and its breaker opens.
func TestTheTransportTellsWhenTheRequestReachedTheNetwork(t *testing.T) {
	stop := make(chan struct{})
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	defer hung.Close()
	defer close(stop)
	for _, reached := range []bool{false, true} {
		tr := &http.Transport{}
		if !reached {
			tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
				<-ctx.Done() // never dials: no connect begins
				return nil, ctx.Err()
			}
		}
		c, err := openai.New(openai.Config{Name: "p0", BaseURL: hung.URL + "/v1", Model: "m", HTTPClient: &http.Client{Transport: tr}})
		if err != nil {
			t.Fatal(err)
		}
		e, err := New(Config{Providers: []ProviderConfig{
			{Name: "p0", Provider: c, Timeouts: latency.Config{Min: 50 * time.Millisecond, Initial: 50 * time.Millisecond}},
			{Name: "p1", Provider: &fake{name: "p1", fn: answer("whatever you asked")}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		r, err := e.Route(RouteConfig{Name: "chat", Criticality: afloat.Assistance, Budget: time.Second,
			Cascade: []RouteTier{{Provider: "p0"}, {Provider: "p1"}}})
		if err != nil {
			t.Fatal(err)
		}
		var last []afloat.Attempt
		for range 8 {
			rep, err := r.Complete(context.Background(), &afloat.Request{Messages: []afloat.Message{{Role: afloat.RoleUser, Content: "hi"}}})
			if err != nil {
				t.Fatal(err)
			}
			last = rep.Attempts
			if a := rep.Attempts[0]; !reached && (a.Outcome != afloat.OutcomeDeadline || a.Error != "cut before its request reached the provider") {
				t.Fatalf("no dial began: attempts %+v; want p0 cut in afloat's own wait", rep.Attempts)
			}
		}
		got := testutil.ToFloat64(e.Metrics().CircuitOpened.WithLabelValues("p0"))
		if want := map[bool]float64{false: 0, true: 1}[reached]; got != want {
			t.Errorf("request reached the network %v: p0's breaker opened %v times; want %v (last attempts %+v)", reached, got, want, last)
		}
		tr.CloseIdleConnections()
	}
}
