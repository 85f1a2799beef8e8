package review

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"
)

// The webhook outbox (Options.Outbox): an answered item carries its Delivery, set to pending
// in the commit that answers it, so that a delivery the process had no time to make is made
// after a restart. A sender (package review/webhook) works it: DueDeliveries, one POST,
// RecordDelivery.

// answering wraps an answer (resolve, reject) so that, when the store keeps an outbox, the
// change that answers the item also marks its delivery pending, due at once.
func (o Options) answering(answer func(*Item, time.Time) error) func(*Item, time.Time) error {
	return func(it *Item, now time.Time) error {
		if err := answer(it, now); err != nil {
			return err
		}
		if o.Outbox {
			it.Delivery = Delivery{State: DeliveryPending, NextAt: now}
		}
		return nil
	}
}

// checkDelivery refuses a Delivery that RecordDelivery cannot store.
func checkDelivery(d Delivery) error {
	switch d.State {
	case DeliveryPending, DeliveryDelivered, DeliveryFailed:
	default:
		return fmt.Errorf("%w: delivery state %q (want pending, delivered or failed)", ErrInvalid, d.State)
	}
	if d.Attempts < 0 {
		return fmt.Errorf("%w: %d delivery attempts", ErrInvalid, d.Attempts)
	}
	return nil
}

// notAnswered is RecordDelivery's refusal of an item that has no answer to deliver.
func notAnswered(it *Item) error { return it.conflict() }

// DueDeliveries returns up to limit answered items whose delivery is pending and due at now,
// the oldest due first; none without an outbox, or when limit is not positive.
func (m *Memory) DueDeliveries(_ context.Context, now time.Time, limit int) ([]*Item, error) {
	if !m.opts.Outbox || limit <= 0 {
		return nil, nil
	}
	m.mu.Lock()
	var due []*Item
	for _, it := range m.items {
		if it.Answered() && it.Delivery.State == DeliveryPending && !it.Delivery.NextAt.After(now) {
			due = append(due, it.clone())
		}
	}
	m.mu.Unlock()
	slices.SortFunc(due, func(a, b *Item) int {
		return cmp.Or(a.Delivery.NextAt.Compare(b.Delivery.NextAt), cmp.Compare(a.ID, b.ID))
	})
	if len(due) > limit {
		due = due[:limit]
	}
	return due, nil
}

// RecordDelivery replaces the Delivery of item id with d.
func (m *Memory) RecordDelivery(_ context.Context, id string, d Delivery) error {
	if err := checkDelivery(d); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	it, ok := m.items[id]
	if !ok {
		return ErrNotFound
	}
	if !it.Answered() {
		cp := m.settled(it)
		return notAnswered(cp)
	}
	cp := it.clone()
	cp.Delivery = d
	m.items[id] = cp
	return nil
}

// DueDeliveries returns up to limit answered items whose delivery is pending and due at now,
// the oldest due first (by the items_due_deliveries index); none without an outbox (a file
// that kept deliveries keeps them for a later open with one), or when limit is not positive.
func (s *SQLite) DueDeliveries(ctx context.Context, now time.Time, limit int) ([]*Item, error) {
	if !s.opts.Outbox || limit <= 0 {
		return nil, nil
	}
	rows, err := s.db.QueryContext(ctx, `SELECT `+itemColumns+` FROM items
		WHERE delivery_state = 'pending' AND delivery_next_ns <= ? AND status IN ('resolved', 'rejected')
		ORDER BY delivery_next_ns, id LIMIT ?`, now.UnixNano(), limit)
	if err != nil {
		return nil, fmt.Errorf("review: due deliveries: %w", err)
	}
	defer rows.Close()
	var due []*Item
	for rows.Next() {
		it, err := scanItem(rows)
		if err != nil {
			return nil, fmt.Errorf("review: due deliveries: %w", err)
		}
		due = append(due, it)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("review: due deliveries: %w", err)
	}
	return due, nil
}

// RecordDelivery replaces the Delivery of item id with d, in one synced commit.
func (s *SQLite) RecordDelivery(ctx context.Context, id string, d Delivery) error {
	if err := checkDelivery(d); err != nil {
		return err
	}
	res, err := s.db.ExecContext(ctx, `UPDATE items SET delivery_state = ?, delivery_attempts = ?, delivery_last_ns = ?,
		delivery_last_status = ?, delivery_last_error = ?, delivery_next_ns = ?
		WHERE id = ? AND status IN ('resolved', 'rejected')`,
		string(d.State), d.Attempts, nsOf(d.LastAttempt), d.LastStatus, d.LastError, nsOf(d.NextAt), id)
	var n int64
	if err == nil {
		n, err = res.RowsAffected()
	}
	if err = s.wrote(ctx, err); err != nil {
		return fmt.Errorf("review: record delivery of %s: %w", id, err)
	}
	if n == 1 {
		return nil
	}
	it, err := s.Lookup(ctx, id) // settled: a lapsed claim reads as pending
	if err != nil {
		return err
	}
	if it.Answered() { // cannot be: an answer is final
		return fmt.Errorf("review: record delivery of %s: no row updated", id)
	}
	return notAnswered(it)
}
