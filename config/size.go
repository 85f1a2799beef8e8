package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Size is a number of bytes, written in the config file as plain bytes (1048576) or with a
// unit: B, KB, MB, GB (powers of 1000) or KiB, MiB, GiB (powers of 1024), such as 1MiB or
// 512KiB.
type Size int64

// ParseSize reads a size such as 1MiB, 512KiB, 10MB or 1024. Units are case-insensitive; a
// space may separate the number from its unit; the number is a whole number.
func ParseSize(s string) (int64, error) {
	text := strings.TrimSpace(s)
	lower := strings.ToLower(text)
	units := []struct {
		suffix string
		mult   int64
	}{
		// Longest suffixes first, so that "KiB" is not read as "B".
		{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30},
		{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9},
		{"b", 1},
	}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(lower, u.suffix) {
			mult = u.mult
			lower = strings.TrimSpace(strings.TrimSuffix(lower, u.suffix))
			break
		}
	}
	n, err := strconv.ParseInt(lower, 10, 64)
	switch {
	case err != nil || lower == "" || lower[0] == '+':
		return 0, fmt.Errorf("invalid size %q (want bytes or a number with B, KB, MB, GB, KiB, MiB or GiB, such as 1MiB)", s)
	case n < 0:
		return 0, fmt.Errorf("size %q is negative", s)
	case n > math.MaxInt64/mult:
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return n * mult, nil
}

// String writes the size in the largest binary unit that divides it.
func (s Size) String() string {
	switch {
	case s != 0 && s%(1<<30) == 0:
		return strconv.FormatInt(int64(s>>30), 10) + "GiB"
	case s != 0 && s%(1<<20) == 0:
		return strconv.FormatInt(int64(s>>20), 10) + "MiB"
	case s != 0 && s%(1<<10) == 0:
		return strconv.FormatInt(int64(s>>10), 10) + "KiB"
	}
	return strconv.FormatInt(int64(s), 10) + "B"
}
