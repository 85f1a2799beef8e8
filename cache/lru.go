package cache

import "time"

// node is one entry in memory and its place on the recency list.
type node struct {
	key        Key
	e          Entry
	exp        time.Time // e.At plus the ttl of its Put: gone from then on
	prev, next *node
}

// lru is the entries in memory: a map to find them and a list by recency, the most recently
// used first. It is not safe for concurrent use: Cache guards it with its mutex. It must not
// be copied after init, as root points to itself.
type lru struct {
	max   int
	nodes map[Key]*node
	root  node // sentinel: root.next is the most recently used, root.prev the least
}

func (l *lru) init(max int) {
	l.max = max
	l.nodes = map[Key]*node{}
	l.root.next = &l.root
	l.root.prev = &l.root
}

// touch makes n the most recently used.
func (l *lru) touch(n *node) {
	if l.root.next == n {
		return
	}
	l.unlink(n)
	l.pushFront(n)
}

func (l *lru) remove(n *node) {
	l.unlink(n)
	delete(l.nodes, n.key)
}

// add stores e under k as the most recently used, replacing what k held, and reports whether
// it evicted the least recently used entry to stay within max.
func (l *lru) add(k Key, e Entry, exp time.Time) (evicted bool) {
	if n := l.nodes[k]; n != nil {
		n.e, n.exp = e, exp
		l.touch(n)
		return false
	}
	var n *node
	if len(l.nodes) >= l.max {
		// The evicted node is reused, so that a full cache allocates no node per Put.
		n = l.root.prev
		l.remove(n)
		evicted = true
	} else {
		n = new(node)
	}
	*n = node{key: k, e: e, exp: exp}
	l.nodes[k] = n
	l.pushFront(n)
	return evicted
}

func (l *lru) unlink(n *node) {
	n.prev.next = n.next
	n.next.prev = n.prev
	n.prev, n.next = nil, nil
}

func (l *lru) pushFront(n *node) {
	n.prev = &l.root
	n.next = l.root.next
	l.root.next.prev = n
	l.root.next = n
}
