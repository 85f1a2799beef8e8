package prompt

import "testing"

func BenchmarkRender(b *testing.B) {
	tmpl, err := Parse("triage/gigachat-pro.v3.tmpl", triage)
	if err != nil {
		b.Fatal(err)
	}
	in := map[string]any{
		"subject": "Cannot log in",
		"message": "Since this morning the app says error 500 when I try to log in. Please help.",
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tmpl.Render(in); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse("triage/gigachat-pro.v3.tmpl", triage); err != nil {
			b.Fatal(err)
		}
	}
}
