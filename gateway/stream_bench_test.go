package gateway

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// benchChunks is how many content chunks each benchmarked stream carries.
const benchChunks = 200

// benchStreamUpstream streams benchChunks content chunks at once, then the finish and [DONE].
func benchStreamUpstream(b *testing.B) *httptest.Server {
	var body bytes.Buffer
	for range benchChunks {
		body.WriteString(`data: {"id":"up-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"tok "},"finish_reason":null}]}` + "\n\n")
	}
	body.WriteString(`data: {"id":"up-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n")
	events := bytes.SplitAfter(body.Bytes(), []byte("\n\n"))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		for _, ev := range events { // one write and one flush an event, as a model server sends them
			_, _ = w.Write(ev)
			f.Flush()
		}
	}))
	b.Cleanup(srv.Close)
	return srv
}

var benchStreamBody = []byte(`{"model": "support-agent", "stream": true, "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Где мой заказ?"}]}`)

// BenchmarkStreamRelay is the work of relaying one streamed completion of 200 chunks over
// loopback, through a bare httputil.ReverseProxy and through the gateway (the OpenAI
// adapter's decode of each chunk, the cascade, the chunk's encode and flush); an op is one
// stream, and ns/chunk its time over its chunks.
func BenchmarkStreamRelay(b *testing.B) {
	up := benchStreamUpstream(b)
	for _, c := range []struct {
		name string
		srv  *httptest.Server
	}{{"proxy", benchProxy(b, up.URL)}, {"afloat", benchGateway(b, up.URL)}} {
		b.Run(c.name, func(b *testing.B) {
			client := c.srv.Client()
			b.ReportAllocs()
			for b.Loop() {
				resp, err := client.Post(c.srv.URL+"/v1/chat/completions", "application/json", bytes.NewReader(benchStreamBody))
				if err != nil {
					b.Fatal(err)
				}
				n := 0
				sc := bufio.NewScanner(resp.Body)
				for sc.Scan() {
					if strings.Contains(sc.Text(), `"content":"tok `) {
						n++
					}
				}
				resp.Body.Close()
				if n != benchChunks {
					b.Fatal(fmt.Sprintf("%d chunks of %d", n, benchChunks))
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchChunks), "ns/chunk")
		})
	}
}
