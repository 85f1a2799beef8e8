package cache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// An entry is kept in Redis as
//
//	version  1 byte, encodingV1
//	At       varint, Unix nanoseconds
//	expiry   varint, Unix nanoseconds (At plus the ttl of the Put)
//	Tier     varint
//	PromptVersion, Provider   each a uvarint length, then the bytes
//	Value    the rest, byte for byte
//
// rather than as JSON: the value is the bulk of it and stays as it was put (JSON would
// re-validate and compact it), and the header is a few bytes. A reader that meets another
// version reads a miss, so a fleet can change the encoding across a rolling deploy.
const encodingV1 = 1

var errTruncated = errors.New("truncated entry")

func encode(e Entry, exp time.Time) []byte {
	b := make([]byte, 0, 1+5*binary.MaxVarintLen64+len(e.PromptVersion)+len(e.Provider)+len(e.Value))
	b = append(b, encodingV1)
	b = binary.AppendVarint(b, e.At.UnixNano())
	b = binary.AppendVarint(b, exp.UnixNano())
	b = binary.AppendVarint(b, int64(e.Tier))
	b = binary.AppendUvarint(b, uint64(len(e.PromptVersion)))
	b = append(b, e.PromptVersion...)
	b = binary.AppendUvarint(b, uint64(len(e.Provider)))
	b = append(b, e.Provider...)
	return append(b, e.Value...)
}

// decode returns the entry that encode wrote into b and its expiry. The Value shares b.
func decode(b []byte) (Entry, time.Time, error) {
	if len(b) == 0 || b[0] != encodingV1 {
		return Entry{}, time.Time{}, fmt.Errorf("unknown encoding (%d bytes)", len(b))
	}
	d := decoder{b: b[1:]}
	at, exp, tier := d.varint(), d.varint(), d.varint()
	e := Entry{
		PromptVersion: d.string(),
		Provider:      d.string(),
		Tier:          int(tier),
		At:            time.Unix(0, at),
	}
	if d.err != nil {
		return Entry{}, time.Time{}, d.err
	}
	if len(d.b) > 0 {
		e.Value = d.b
	}
	return e, time.Unix(0, exp), nil
}

// decoder reads the fields of an encoded entry; the first error sticks.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errTruncated
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) string() string {
	if d.err != nil {
		return ""
	}
	l, n := binary.Uvarint(d.b)
	if n <= 0 || l > uint64(len(d.b)-n) {
		d.err = errTruncated
		return ""
	}
	s := string(d.b[n : n+int(l)])
	d.b = d.b[n+int(l):]
	return s
}
