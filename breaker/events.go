package breaker

import (
	"context"
)

// pending is an event in the delivery queue. Its place is taken, by epoch, before the swap
// that makes the change, and the event is filled in after it: so a change whose writer is
// held up between the store and the queue still comes out before the changes that follow it.
type pending struct {
	epoch uint64
	ev    Event
	ready bool
}

// swap swaps next in for rec in st, as Store.Swap does, and delivers an Event when that
// changed the state.
func (b *Breaker) swap(ctx context.Context, st Store, rec, next Record, forced bool) (Record, bool, error) {
	var slot *pending
	if b.onChange != nil && next.State != rec.State {
		slot = b.reserve(next.Epoch)
	}
	cur, swapped, err := st.Swap(ctx, b.name, rec.Revision, next)
	swapped = swapped && err == nil
	if slot != nil {
		ev := Event{Name: b.name, From: rec.State, To: cur.State, At: cur.Since, Forced: forced}
		if cur.State == StateOpen {
			ev.Kind, ev.Until = cur.Kind, cur.Until
		}
		b.settle(slot, ev, swapped)
	}
	return cur, swapped, err
}

// reserve takes the place of the event of epoch in the queue, after those of earlier epochs.
func (b *Breaker) reserve(epoch uint64) *pending {
	slot := &pending{epoch: epoch}
	b.mu.Lock()
	defer b.mu.Unlock()
	i := len(b.queue)
	for i > 0 && b.queue[i-1].epoch > epoch {
		i--
	}
	b.queue = append(b.queue, nil)
	copy(b.queue[i+1:], b.queue[i:])
	b.queue[i] = slot
	return slot
}

// settle fills slot with ev, or drops it when the swap did not happen, and then delivers the
// queue unless another goroutine is delivering it already.
func (b *Breaker) settle(slot *pending, ev Event, happened bool) {
	b.mu.Lock()
	if happened {
		slot.ev, slot.ready = ev, true
	} else {
		for i, q := range b.queue {
			if q == slot {
				b.queue = append(b.queue[:i], b.queue[i+1:]...)
				break
			}
		}
	}
	if b.dispatching {
		b.mu.Unlock()
		return
	}
	b.dispatching = true
	b.mu.Unlock()
	b.dispatch()
}

// dispatch delivers the events at the head of the queue until it is empty or its head is
// still waiting for its swap (whose settle then delivers it). The lock is not held while the
// callback runs. If the callback panics, the next settle delivers what is left.
func (b *Breaker) dispatch() {
	finished := false
	defer func() {
		if !finished {
			b.mu.Lock()
			b.dispatching = false
			b.mu.Unlock()
		}
	}()
	for {
		b.mu.Lock()
		if len(b.queue) == 0 || !b.queue[0].ready {
			b.dispatching = false
			b.mu.Unlock()
			finished = true
			return
		}
		ev := b.queue[0].ev
		b.queue[0] = nil
		b.queue = b.queue[1:]
		b.mu.Unlock()
		b.onChange(ev)
	}
}
