package canary

import (
	"strconv"
	"testing"
)

func key(i int) string { return "tenant-" + strconv.Itoa(i) }

func TestArmString(t *testing.T) {
	for a, want := range map[Arm]string{Incumbent: "incumbent", Candidate: "candidate", 5: "Arm(5)"} {
		if got := a.String(); got != want {
			t.Errorf("Arm(%d).String() = %q, want %q", int(a), got, want)
		}
	}
}

func TestPickShare(t *testing.T) {
	for _, salt := range []string{"", "prompt-v7"} {
		t.Run("salt "+strconv.Quote(salt), func(t *testing.T) {
			c, _ := newTest(t, Config{Share: 0.10, Salt: salt})
			const n = 100_000
			picked := 0
			for i := range n {
				if c.Pick(key(i)) == Candidate {
					picked++
				}
			}
			if f := float64(picked) / n; f < 0.09 || f > 0.11 {
				t.Fatalf("candidate got %.4f of the keys, want 0.09–0.11", f)
			}
		})
	}
}

func TestPickStableAndMonotone(t *testing.T) {
	shares := []float64{0.01, 0.05, 0.1, 0.25, 0.5, 0.9, 1}
	canaries := make([]*Canary, len(shares))
	for i, s := range shares {
		canaries[i], _ = newTest(t, Config{Share: s})
	}
	for i := range 20_000 {
		k := key(i)
		prev := Incumbent
		for j, c := range canaries {
			arm := c.Pick(k)
			if arm != c.Pick(k) {
				t.Fatalf("Pick(%q) changed at share %v", k, shares[j])
			}
			if prev == Candidate && arm != Candidate {
				t.Fatalf("Pick(%q): candidate at a smaller share, incumbent at %v", k, shares[j])
			}
			prev = arm
		}
		if prev != Candidate {
			t.Fatalf("Pick(%q) = incumbent at share 1", k)
		}
	}
}

func TestSaltChangesKeys(t *testing.T) {
	a, _ := newTest(t, Config{Share: 0.1, Salt: "a"})
	b, _ := newTest(t, Config{Share: 0.1, Salt: "b"})
	both, inA := 0, 0
	for i := range 10_000 {
		if a.Pick(key(i)) == Candidate {
			inA++
			if b.Pick(key(i)) == Candidate {
				both++
			}
		}
	}
	// Independent picks share about 10% of a's candidates; the same salt would share all.
	if both*2 > inA {
		t.Fatalf("%d of salt a's %d candidate keys are salt b's too", both, inA)
	}
}

func TestPickAfterRollback(t *testing.T) {
	c, _ := newTest(t, Config{Share: 0.5})
	if _, err := c.Rollback("bob"); err != nil {
		t.Fatal(err)
	}
	for i := range 100_000 {
		if c.Pick(key(i)) != Incumbent {
			t.Fatalf("Pick(%q) = candidate after rollback", key(i))
		}
	}
}

func TestPickDoesNotAllocate(t *testing.T) {
	c, _ := newTest(t, Config{})
	k := key(42)
	if n := testing.AllocsPerRun(1000, func() { c.Pick(k) }); n != 0 {
		t.Fatalf("Pick allocates %v times", n)
	}
}

func BenchmarkPick(b *testing.B) {
	c, _ := newTest(b, Config{})
	k := "tenant-0a1b2c3d-4e5f"
	b.ReportAllocs()
	for b.Loop() {
		c.Pick(k)
	}
}
