package cache

import (
	"crypto/sha256"
	"encoding/binary"
)

// Key identifies one cached answer: sha256 over scope, tenant and the canonical input.
type Key [32]byte

// KeyOf returns the key of an answer for scope (task or route name), tenant ("" for none) and
// input, the canonical JSON of the call's input (json.Marshal of a map[string]any, whose keys
// are sorted, so that equal inputs give equal keys).
//
// The hash is taken over
//
//	len(scope) scope len(tenant) tenant input
//
// with each length as 8 bytes big-endian: the lengths keep ("a", "bc") apart from ("ab", "c"),
// and input, the last field, needs none. The layout is part of the Redis keys a fleet shares,
// so changing it makes every replica of a mixed fleet miss the others' answers.
func KeyOf(scope, tenant string, input []byte) Key {
	h := sha256.New() // on the stack: the compiler devirtualizes it
	// The strings go through buf rather than []byte(s), which copies any string over 32
	// bytes to the heap.
	var buf [64]byte
	for _, s := range [...]string{scope, tenant} {
		binary.BigEndian.PutUint64(buf[:8], uint64(len(s)))
		h.Write(buf[:8])
		for len(s) > 0 {
			n := copy(buf[:], s)
			h.Write(buf[:n])
			s = s[n:]
		}
	}
	h.Write(input)
	var k Key
	h.Sum(k[:0])
	return k
}
