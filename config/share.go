package config

import (
	"fmt"
	"strconv"
	"strings"
)

// Share is a fraction, written in the config file as a percentage (10%, 2.5%) or as a
// number (0.1).
type Share float64

// ParseShare reads a share such as 10%, 2.5% or 0.1. It refuses a negative one; what is too
// large depends on the key, and validation says.
func ParseShare(s string) (float64, error) {
	text := strings.TrimSpace(s)
	pct, isPct := strings.CutSuffix(text, "%")
	v, err := strconv.ParseFloat(strings.TrimSpace(pct), 64)
	if err != nil || v != v { // v != v: NaN
		return 0, fmt.Errorf("invalid share %q (want a percentage such as 10%% or a number such as 0.1)", s)
	}
	if isPct {
		v /= 100
	}
	if v < 0 {
		return 0, fmt.Errorf("share %q is negative", s)
	}
	return v, nil
}

// String writes the share as a percentage.
func (s Share) String() string { return strconv.FormatFloat(float64(s)*100, 'f', -1, 64) + "%" }
