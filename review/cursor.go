package review

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// A cursor is the position after the last item of a page: its queue time and id, the order
// List walks in. It is opaque to callers.

func encodeCursor(it *Item) string {
	raw := strconv.FormatInt(it.CreatedAt.UnixNano(), 10) + "/" + it.ID
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

func decodeCursor(c string) (ns int64, id string, err error) {
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil {
		s, rest, ok := strings.Cut(string(raw), "/")
		ns, err = strconv.ParseInt(s, 10, 64)
		if err == nil && ok && rest != "" {
			return ns, rest, nil
		}
	}
	return 0, "", fmt.Errorf("%w: cursor %q is not one List returned", ErrInvalid, c)
}

// after reports whether it comes after the cursor position (ns, id) in List's order.
func after(it *Item, ns int64, id string) bool {
	t := it.CreatedAt.UnixNano()
	return t > ns || (t == ns && it.ID > id)
}

// timeOf turns stored nanoseconds back into a time; 0 is the zero time.
func timeOf(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// nsOf is the stored form of t: nanoseconds since 1970, 0 for the zero time.
func nsOf(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}
