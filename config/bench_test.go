package config

import (
	"os"
	"testing"

	"github.com/jonboulle/clockwork"

	"github.com/afloat-dev/afloat/review"
)

func BenchmarkParse(b *testing.B) {
	data, err := os.ReadFile(examplePath)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(data, "../examples", noEnv); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBuild(b *testing.B) {
	f, err := Load(examplePath)
	if err != nil {
		b.Fatal(err)
	}
	clk := clockwork.NewFakeClock()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.Build(BuildOptions{Clock: clk, Review: review.NewMemory(clk)}); err != nil {
			b.Fatal(err)
		}
	}
}
