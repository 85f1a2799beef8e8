package latency

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

func TestSetSamePointerPerKey(t *testing.T) {
	tests := []struct {
		name string
		set  *Set
	}{
		{"NewSet", NewSet()},
		{"zero Set", &Set{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.set
			a, err := s.Estimator("gigachat-pro", "triage", Config{Max: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			// A later cfg is ignored: the Estimator already exists.
			again, err := s.Estimator("gigachat-pro", "triage", Config{Max: time.Minute})
			if err != nil || again != a {
				t.Errorf("second lookup = %p, %v; want %p, nil", again, err, a)
			}
			if got := again.Config().Max; got != 5*time.Second {
				t.Errorf("Max = %v, want the first cfg's 5s", got)
			}
			other, _ := s.Estimator("gigachat-pro", "moderation", Config{})
			third, _ := s.Estimator("yandexgpt", "triage", Config{})
			if other == a || third == a || other == third {
				t.Error("different keys share an Estimator")
			}
		})
	}
}

func TestSetInvalidConfigIsNotStored(t *testing.T) {
	s := NewSet()
	if e, err := s.Estimator("p", "t", Config{Percentile: 2}); err == nil || e != nil {
		t.Fatalf("Estimator with an invalid cfg = %v, %v; want nil and an error", e, err)
	}
	e, err := s.Estimator("p", "t", Config{})
	if err != nil || e == nil {
		t.Fatalf("Estimator with a valid cfg after an invalid one = %v, %v", e, err)
	}
	n := 0
	s.Each(func(string, string, *Estimator) { n++ })
	if n != 1 {
		t.Errorf("Each visited %d estimators, want 1", n)
	}
}

func TestSetEachOrdered(t *testing.T) {
	s := NewSet()
	keys := [][2]string{{"yandexgpt", "triage"}, {"gigachat-pro", "triage"}, {"gigachat-pro", "moderation"}, {"t-lite", "triage"}}
	want := make(map[[2]string]*Estimator)
	for _, k := range keys {
		e, err := s.Estimator(k[0], k[1], Config{})
		if err != nil {
			t.Fatal(err)
		}
		want[k] = e
	}
	var got [][2]string
	s.Each(func(provider, task string, e *Estimator) {
		k := [2]string{provider, task}
		if want[k] != e {
			t.Errorf("Each gave %v a different Estimator", k)
		}
		got = append(got, k)
		// fn may call back into the Set: the lock is not held.
		if _, err := s.Estimator(provider, "callback", Config{}); err != nil {
			t.Error(err)
		}
	})
	wantOrder := [][2]string{{"gigachat-pro", "moderation"}, {"gigachat-pro", "triage"}, {"t-lite", "triage"}, {"yandexgpt", "triage"}}
	if !slices.Equal(got, wantOrder) {
		t.Errorf("Each order = %v, want %v", got, wantOrder)
	}
}

func TestSetConcurrentCreation(t *testing.T) {
	s := NewSet()
	const workers = 8
	got := make([][]*Estimator, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range 50 {
				e, err := s.Estimator("p", fmt.Sprint("task-", i), Config{})
				if err != nil {
					t.Error(err)
					return
				}
				e.Observe(time.Duration(i) * time.Millisecond)
				got[w] = append(got[w], e)
			}
		})
	}
	wg.Wait()
	for w := 1; w < workers; w++ {
		if !slices.Equal(got[w], got[0]) {
			t.Fatalf("worker %d got other Estimators than worker 0", w)
		}
	}
	for i, e := range got[0] {
		if n := e.Samples(); n != workers {
			t.Errorf("task-%d has %d samples, want %d: an Estimator was replaced", i, n, workers)
		}
	}
}

func BenchmarkSetEstimatorHit(b *testing.B) {
	s := NewSet()
	if _, err := s.Estimator("gigachat-pro", "triage", Config{}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Estimator("gigachat-pro", "triage", Config{}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
