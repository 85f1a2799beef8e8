package gateway

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/cascade"
	"github.com/afloat-dev/afloat/provider/openai"
	"github.com/prometheus/client_golang/prometheus"
)

// benchUpstream answers every chat completion at once with the same small completion.
func benchUpstream(b *testing.B) *httptest.Server {
	body := []byte(`{"id":"up-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Ваш заказ в пути и будет у вас завтра."},"finish_reason":"stop"}],"usage":{"prompt_tokens":24,"completion_tokens":12,"total_tokens":36}}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	b.Cleanup(srv.Close)
	return srv
}

// benchGateway serves one route whose only tier is the upstream, through the real OpenAI
// adapter, with metrics on and no logging.
func benchGateway(b *testing.B, upstream string) *httptest.Server {
	c, err := openai.New(openai.Config{Name: "primary", BaseURL: upstream + "/v1", Model: "m"})
	if err != nil {
		b.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	e, err := cascade.New(cascade.Config{Providers: []cascade.ProviderConfig{{Name: "primary", Provider: c}}})
	if err != nil {
		b.Fatal(err)
	}
	r, err := e.Route(cascade.RouteConfig{Name: "support-agent", Criticality: afloat.Assistance, Cascade: []cascade.RouteTier{{Provider: "primary"}}})
	if err != nil {
		b.Fatal(err)
	}
	gw, err := New(Config{Engine: e, Routes: map[string]*cascade.Route{"support-agent": r}, Gatherer: reg})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(gw.Handler())
	b.Cleanup(srv.Close)
	return srv
}

// benchProxy serves a bare httputil.ReverseProxy to upstream. It reads each request's body
// whole before relaying it, as the gateway does and as bench's baseline proxy does: else
// net/http's transport re-reads the body that the server closed once the answer's headers
// went out, and drops the upstream connection with the answer still flowing
// (golang/go#40747; a stream then ends short, one run in a few of BenchmarkStreamRelay).
func benchProxy(b *testing.B, upstream string) *httptest.Server {
	u, _ := url.Parse(upstream)
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		rp.ServeHTTP(w, r)
	}))
	b.Cleanup(srv.Close)
	return srv
}

var benchBody = []byte(`{"model": "support-agent", "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Где мой заказ?"}]}`)

// post sends one chat completion over client and returns how long it took.
func post(b *testing.B, client *http.Client, target string) time.Duration {
	start := time.Now()
	resp, err := client.Post(target+"/v1/chat/completions", "application/json", bytes.NewReader(benchBody))
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		b.Fatalf("status %d", resp.StatusCode)
	}
	return time.Since(start)
}

func percentile(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

// BenchmarkAddedLatency measures, in one run and over one keep-alive connection each, a
// chat completion sent directly to a local upstream, through a bare httputil.ReverseProxy,
// and through the gateway (decode, route, adapter, encode). Requests alternate between the
// three so that machine noise hits them alike. It reports the added latency of the proxy
// and of the gateway over the direct call at p50 and p99, and their ratio.
func BenchmarkAddedLatency(b *testing.B) {
	up := benchUpstream(b)
	targets := []string{up.URL, benchProxy(b, up.URL).URL, benchGateway(b, up.URL).URL}
	clients := make([]*http.Client, len(targets))
	for i := range clients {
		clients[i] = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
		for range 200 { // warm up connections, pools and estimators
			post(b, clients[i], targets[i])
		}
	}
	lat := make([][]time.Duration, len(targets))
	b.ResetTimer()
	for b.Loop() {
		for i, t := range targets {
			lat[i] = append(lat[i], post(b, clients[i], t))
		}
	}
	b.StopTimer()
	if len(lat[0]) < 100 {
		return // too few samples for percentiles (a -benchtime=1x run)
	}
	direct50, direct99 := percentile(lat[0], .5), percentile(lat[0], .99)
	proxy50, proxy99 := percentile(lat[1], .5)-direct50, percentile(lat[1], .99)-direct99
	gw50, gw99 := percentile(lat[2], .5)-direct50, percentile(lat[2], .99)-direct99
	b.ReportMetric(float64(direct50.Microseconds()), "direct-p50-µs")
	b.ReportMetric(float64(proxy50.Microseconds()), "proxy-added-p50-µs")
	b.ReportMetric(float64(gw50.Microseconds()), "gateway-added-p50-µs")
	b.ReportMetric(float64(proxy99.Microseconds()), "proxy-added-p99-µs")
	b.ReportMetric(float64(gw99.Microseconds()), "gateway-added-p99-µs")
	b.ReportMetric(float64(gw50)/float64(proxy50), "gateway/proxy-added-p50")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkGatewayAt1000rps paces chat completions through the gateway at 1,000 requests
// per second for two seconds (open loop: a request starts on schedule whatever the others
// do) and reports the latency percentiles and the added p99 over a direct call paced the
// same way in the same run.
func BenchmarkGatewayAt1000rps(b *testing.B) {
	up := benchUpstream(b)
	gw := benchGateway(b, up.URL)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	paced := func(target string) []time.Duration {
		const rate, total = 1000, 2000
		var mu sync.Mutex
		var wg sync.WaitGroup
		out := make([]time.Duration, 0, total)
		tick := time.NewTicker(time.Second / rate)
		defer tick.Stop()
		for range total {
			<-tick.C
			wg.Go(func() {
				d := post(b, client, target)
				mu.Lock()
				out = append(out, d)
				mu.Unlock()
			})
		}
		wg.Wait()
		return out
	}
	for range 300 {
		post(b, client, gw.URL)
		post(b, client, up.URL)
	}
	b.ResetTimer()
	var direct, through []time.Duration
	for b.Loop() {
		direct = append(direct, paced(up.URL)...)
		through = append(through, paced(gw.URL)...)
	}
	b.StopTimer()
	b.ReportMetric(float64(percentile(direct, .5).Microseconds()), "direct-p50-µs")
	b.ReportMetric(float64(percentile(direct, .99).Microseconds()), "direct-p99-µs")
	b.ReportMetric(float64(percentile(through, .5).Microseconds()), "gateway-p50-µs")
	b.ReportMetric(float64(percentile(through, .99).Microseconds()), "gateway-p99-µs")
	b.ReportMetric(float64((percentile(through, .99) - percentile(direct, .99)).Microseconds()), "gateway-added-p99-µs")
	b.ReportMetric(0, "ns/op")
}
