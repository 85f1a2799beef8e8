package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/afloat-dev/afloat"
)

var ticket = afloat.Input{"subject": "Двойное списание", "message": "Карта списала деньги дважды, верните одно."}

const wantTriage = `{"department":"billing","is_urgent":0.9,"urgency_score":2.5}`

func canonJSON(t *testing.T, b []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not json: %v: %s", err, b)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// TestGigaChatDownYandexAnswers: GigaChat answers 502, YandexGPT answers with a fenced
// JSON inside prose; the task returns the normalized result, degraded, from yandexgpt, on
// the library's path and the gateway's alike.
func TestGigaChatDownYandexAnswers(t *testing.T) {
	s := newServers(t)
	s.gigachat.Handle(gigachatChat, fixtureOf(t, "gigachat/err_502_html.http"))
	s.yandex.Handle(yandexPath, fixtureOf(t, "yandex_fenced.http"))
	rt := s.runtime(t)

	t.Run("library", func(t *testing.T) {
		res, err := rt.Tasks["triage"].RunJSON(t.Context(), ticket)
		if err != nil {
			t.Fatal(err)
		}
		if res.Source != afloat.SourceModel || !res.Degraded || res.Provider != "yandexgpt" || res.Tier != 1 ||
			res.Reason != afloat.Reason(afloat.OutcomeUnavailable) {
			t.Errorf("source, degraded, provider, tier, reason = %s, %v, %s, %d, %s; want model, true, yandexgpt, 1, unavailable",
				res.Source, res.Degraded, res.Provider, res.Tier, res.Reason)
		}
		if got := canonJSON(t, res.Value); got != wantTriage {
			t.Errorf("result = %s, want %s", got, wantTriage)
		}
		first, last := res.Attempts[0], res.Attempts[len(res.Attempts)-1]
		if first.Provider != "gigachat-pro" || first.Outcome != afloat.OutcomeUnavailable || !strings.Contains(first.Error, "status 502") {
			t.Errorf("first attempt = %+v, want gigachat-pro unavailable with its 502", first)
		}
		if last.Provider != "yandexgpt" || last.Outcome != afloat.OutcomeOK {
			t.Errorf("last attempt = %+v, want yandexgpt ok", last)
		}
		if res.Usage.InputTokens != 131 || res.Usage.OutputTokens != 41 {
			t.Errorf("usage = %+v, want YandexGPT's string counts 131/41", res.Usage)
		}
	})

	t.Run("gateway", func(t *testing.T) {
		gw := gatewayOf(t, rt)
		body, _ := json.Marshal(map[string]any{"input": ticket})
		resp, err := http.Post(gw.URL+"/v1/tasks/triage", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var env struct {
			Result   json.RawMessage `json:"result"`
			Source   string          `json:"source"`
			Degraded bool            `json:"degraded"`
			Provider string          `json:"provider"`
			Tier     int             `json:"tier"`
		}
		if err := json.Unmarshal(raw, &env); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%d %s: %v", resp.StatusCode, raw, err)
		}
		if env.Source != "model" || !env.Degraded || env.Provider != "yandexgpt" || env.Tier != 1 || canonJSON(t, env.Result) != wantTriage {
			t.Errorf("envelope = %s", raw)
		}
		for _, secret := range []string{gigachatKey, yandexKey, "e2e-token"} {
			if strings.Contains(string(raw), secret) {
				t.Errorf("the answer holds a credential: %s", raw)
			}
		}
	})

	// What went over the wire: one token exchange shared by both calls, each provider's own
	// auth, Yandex's structured output, and the emergency tier never asked.
	if n := len(s.gigachat.Requests(gigachatAuth)); n != 1 {
		t.Errorf("%d token exchanges, want 1", n)
	}
	chat := s.gigachat.Last(t, gigachatChat)
	if !strings.HasPrefix(chat.Header.Get("Authorization"), "Bearer eyJ") {
		t.Errorf("gigachat chat authorization = %.20q…", chat.Header.Get("Authorization"))
	}
	y := s.yandex.Last(t, yandexPath)
	var sent struct {
		ModelURI   string          `json:"modelUri"`
		JSONSchema json.RawMessage `json:"jsonSchema"`
	}
	if err := json.Unmarshal(y.Body, &sent); err != nil || y.Header.Get("Authorization") != "Api-Key "+yandexKey ||
		sent.ModelURI != "gpt://b1ge2efolder/yandexgpt/latest" || len(sent.JSONSchema) == 0 {
		t.Errorf("yandex request: %v %s", y.Header, y.Body)
	}
	if n := len(s.tlite.Requests(tlitePath)); n != 0 {
		t.Errorf("t-lite asked %d times, want never", n)
	}
}
