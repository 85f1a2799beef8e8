package openai

import (
	"io"
	"testing"

	"github.com/afloat-dev/afloat"
)

func BenchmarkEncodeRequest(b *testing.B) {
	req := &afloat.Request{
		Messages: []afloat.Message{
			{Role: afloat.RoleSystem, Content: "You triage support tickets. Answer with one JSON object."},
			{Role: afloat.RoleUser, Content: "Subject: не работает оплата\nMessage: карта отклонена третий раз"},
		},
		Tools:          []afloat.Tool{{Name: "get_weather", Description: "Weather by city", Parameters: weatherParams}},
		ResponseFormat: &afloat.ResponseFormat{Type: "json_schema", Schema: weatherParams},
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := encodeRequest(req, "gpt-4o", false); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeResponse(b *testing.B) {
	body := read(b, "chat_tool_call.http").Body
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeResponse(body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkStreamRecv(b *testing.B) {
	body := read(b, "stream_tool_call.http").Body
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		s := streamOf(string(body))
		for {
			if _, err := s.Recv(); err == io.EOF {
				break
			} else if err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkComplete is one whole call over loopback HTTP/1.1 with keep-alive.
func BenchmarkComplete(b *testing.B) {
	srv := replay(b, "chat_ok.http")
	c := newClient(b, srv.URL, nil)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Complete(b.Context(), hello); err != nil {
			b.Fatal(err)
		}
	}
}
