package booking

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/sdk/client"
)

// Courses runs the commands against a topic. Safe for concurrent use:
// racing decisions are serialized by their append conditions.
type Courses struct {
	c         *client.Client
	topic     string
	conflicts atomic.Int64
}

// New returns Courses over topic (create it with CreateTopic).
func New(c *client.Client, topic string) *Courses { return &Courses{c: c, topic: topic} }

// CreateTopic creates the topic with one partition: a query and its
// condition hold within a partition. A topic already there is fine.
func (cs *Courses) CreateTopic(ctx context.Context) error {
	_, err := cs.c.CreateTopic(ctx, cs.topic, client.WithPartitions(1))
	if connect.CodeOf(err) == connect.CodeAlreadyExists {
		return nil
	}
	return err
}

// Conflicts returns how many appends were refused because a matching
// event came in after their read (each was decided again).
func (cs *Courses) Conflicts() int64 { return cs.conflicts.Load() }

// DefineCourse defines a course with capacity seats (ErrCourseExists when
// the id is taken). The boundary: the course's definition.
func (cs *Courses) DefineCourse(ctx context.Context, course string, capacity int) error {
	q := client.Query{{Types: []string{CourseDefined}, Tags: []string{CourseTag(course)}}}
	return cs.decide(ctx, q, func(events []Event) (Event, error) {
		return Fold(course, "", events).Define(capacity)
	})
}

// Book gives student a seat in course (ErrCourseFull, ErrAlreadyBooked,
// ErrTooManyCourses, ErrNoCourse). The boundary: the course and its
// bookings, and the student's bookings in any course.
func (cs *Courses) Book(ctx context.Context, course, student string) error {
	q := client.Query{
		{Types: []string{CourseDefined, SeatBooked}, Tags: []string{CourseTag(course)}},
		{Types: []string{SeatBooked}, Tags: []string{StudentTag(student)}},
	}
	return cs.decide(ctx, q, func(events []Event) (Event, error) {
		return Fold(course, student, events).Book()
	})
}

// decide is the read-decide-append loop: the event decided on what q
// matches is appended only if nothing matching q came after the read.
// Every refusal means another writer's event went in, so the retries end
// when the contention does; ctx bounds them.
func (cs *Courses) decide(ctx context.Context, q client.Query, decide func([]Event) (Event, error)) error {
	for {
		events, pos, err := cs.read(ctx, q)
		if err != nil {
			return err
		}
		e, err := decide(events)
		if err != nil {
			return err
		}
		v, err := json.Marshal(e)
		if err != nil {
			return err
		}
		// The key is the course: its events are also a key's history.
		msg := client.Message{Type: e.Type, Tags: e.Tags(), Value: v}
		_, err = cs.c.Append(ctx, cs.topic, []byte(e.Course), []client.Message{msg}, client.FailIfMatched(q, pos))
		var ce *client.ConditionError
		if !errors.As(err, &ce) {
			return err
		}
		cs.conflicts.Add(1)
	}
}

// read returns the events q matches and the position to append after
// (nil: the partition was empty).
func (cs *Courses) read(ctx context.Context, q client.Query) ([]Event, *uint64, error) {
	var events []Event
	var opts []client.ReadOption
	for {
		r, err := cs.c.Query(ctx, cs.topic, q, opts...)
		if err != nil {
			return nil, nil, err
		}
		for _, rec := range r.Records {
			e, err := Decode(rec)
			if err != nil {
				return nil, nil, err
			}
			events = append(events, e)
		}
		if !r.More {
			if !r.HasPosition {
				return events, nil, nil
			}
			return events, &r.Position, nil
		}
		// Many matches come in pages.
		opts = []client.ReadOption{client.FromOffset(r.Records[len(r.Records)-1].Offset + 1)}
	}
}

// Decode returns the event a record holds.
func Decode(rec client.Record) (Event, error) {
	var e Event
	for _, h := range rec.Headers {
		if h.Key == client.TypeHeader {
			e.Type = string(h.Value)
		}
	}
	if err := json.Unmarshal(rec.Value, &e); err != nil {
		return e, fmt.Errorf("booking: record at offset %d: %w", rec.Offset, err)
	}
	return e, nil
}
