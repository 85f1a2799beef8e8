package normalize

import (
	"strings"
	"testing"
)

// benchSchema is a richer triage answer: a summary, tags and the customer, so that one answer
// is about 1 KB.
const benchSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "department": {"enum": ["technical", "billing", "sales", "other", null]},
    "is_urgent": {"type": "number", "minimum": 0, "maximum": 1},
    "urgency_score": {"type": "number", "minimum": 0, "maximum": 3},
    "language": {"enum": ["ru", "pt", "en"]},
    "summary": {"type": "string", "maxLength": 2000},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 10},
    "customer": {
      "type": "object",
      "properties": {
        "name": {"type": ["string", "null"]},
        "email": {"type": ["string", "null"]},
        "plan": {"enum": ["free", "pro", "enterprise", null]},
        "seats": {"type": ["integer", "null"], "minimum": 1}
      },
      "required": ["name", "email", "plan"],
      "additionalProperties": false
    }
  },
  "required": ["department", "is_urgent", "urgency_score", "language", "summary", "tags", "customer"],
  "additionalProperties": false
}`

// benchAnswer is a valid answer of 1 KB (1,024 bytes).
const benchAnswer = `{
  "department": "technical",
  "is_urgent": 0.9,
  "urgency_score": 2.6,
  "language": "ru",
  "summary": "Клиент сообщает, что с утра не может войти в личный кабинет: после ввода пароля страница выдаёт ошибку 502, повторные попытки и другой браузер не помогают. Из-за этого отдел продаж не может выставлять счета, работа остановлена. Клиент просит срочно проверить сервер авторизации и сообщить сроки восстановления; ранее такая же ошибка была в прошлом месяце, её исправили за один час.",
  "tags": ["login", "502", "auth", "blocked", "production", "repeat-incident", "sla", "vip-12"],
  "customer": {"name": "Анна Смирнова", "email": "anna@romashka.example", "plan": "enterprise", "seats": 120}
}`

func BenchmarkNormalize(b *testing.B) {
	c, err := Compile("ticket", []byte(benchSchema), WithSynonyms(map[string][]string{"department": {"категория"}}))
	if err != nil {
		b.Fatal(err)
	}
	messy := strings.NewReplacer(`"department"`, `'Категория'`, `"technical"`, `'Technical'`, `0.9`, `"0,9"`,
		`"seats": 120}`, `seats: 120,},`).Replace(benchAnswer)
	cases := []struct {
		name, text string
		steps      Steps
	}{
		{"clean", benchAnswer, 0},
		{"fenced", "Вот ваш ответ:\n```json\n" + benchAnswer + "\n```\nЕсли нужно, уточню.", StepLocate},
		{"repaired", strings.Replace(benchAnswer, `"urgency_score": 2.6,`, `'urgency_score': 2.6, // high`, 1), StepRepair},
		{"every step", "Результат:\n```json\n" + messy + "\n```", StepLocate | StepRepair | StepRename | StepCoerce},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			out := c.Normalize(tc.text)
			if out.Err != nil || out.Steps != tc.steps {
				b.Fatalf("outcome %s %v", out.Steps, out.Err)
			}
			b.SetBytes(int64(len(tc.text)))
			b.ReportAllocs()
			for b.Loop() {
				c.Normalize(tc.text)
			}
		})
	}
}
