package booking_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/examples/booking"
	"github.com/rewind-io/rewind/internal/enginetest"
	"github.com/rewind-io/rewind/sdk/client"
)

// race runs n writers at once and counts their outcomes: how many were
// accepted and how many were refused with want. Any other error fails t.
func race(t *testing.T, n int, want error, write func(i int) error) (accepted, refused int) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			err := write(i)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				accepted++
			case errors.Is(err, want):
				refused++
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	return accepted, refused
}

// TestRacingClaims: writers race on a real node for what only some of
// them may have: a course id, the seats of a course, a student's quota of
// courses. However they interleave, exactly as many claims as the rule
// allows are accepted, and the rest are refused by the rule (after a
// retry, when their append came second).
func TestRacingClaims(t *testing.T) {
	n := enginetest.StartNode(t, engine.Config{Dir: t.TempDir()})
	c := client.New(n.URL)
	cs := booking.New(c, "courses")
	ctx := context.Background()
	if err := cs.CreateTopic(ctx); err != nil {
		t.Fatal(err)
	}

	t.Run("one course id", func(t *testing.T) {
		ok, no := race(t, 8, booking.ErrCourseExists, func(i int) error {
			return cs.DefineCourse(ctx, "go-101", 1+i)
		})
		if ok != 1 || no != 7 {
			t.Fatalf("%d definitions accepted, %d refused: want 1 and 7", ok, no)
		}
	})
	t.Run("the last seat", func(t *testing.T) {
		if err := cs.DefineCourse(ctx, "sql-1", 1); err != nil {
			t.Fatal(err)
		}
		ok, no := race(t, 8, booking.ErrCourseFull, func(i int) error {
			return cs.Book(ctx, "sql-1", fmt.Sprint("student-", i))
		})
		if ok != 1 || no != 7 {
			t.Fatalf("%d bookings accepted, %d refused: want 1 and 7", ok, no)
		}
		stored, err := c.Query(ctx, "courses", client.Query{{Types: []string{booking.SeatBooked}, Tags: []string{booking.CourseTag("sql-1")}}})
		if err != nil || len(stored.Records) != 1 {
			t.Fatalf("bookings of sql-1 stored: %+v %v", stored, err)
		}
	})
	t.Run("three seats", func(t *testing.T) {
		if err := cs.DefineCourse(ctx, "rust-2", 3); err != nil {
			t.Fatal(err)
		}
		ok, no := race(t, 8, booking.ErrCourseFull, func(i int) error {
			return cs.Book(ctx, "rust-2", fmt.Sprint("student-", i))
		})
		if ok != 3 || no != 5 {
			t.Fatalf("%d bookings accepted, %d refused: want 3 and 5", ok, no)
		}
	})
	t.Run("a student's quota", func(t *testing.T) {
		const courses = 6
		for i := range courses {
			if err := cs.DefineCourse(ctx, fmt.Sprint("elective-", i), 10); err != nil {
				t.Fatal(err)
			}
		}
		ok, no := race(t, courses, booking.ErrTooManyCourses, func(i int) error {
			return cs.Book(ctx, fmt.Sprint("elective-", i), "sam")
		})
		if ok != booking.MaxCourses || no != courses-booking.MaxCourses {
			t.Fatalf("%d bookings accepted, %d refused: want %d and %d", ok, no, booking.MaxCourses, courses-booking.MaxCourses)
		}
	})
	t.Logf("%d appends retried after a conflict", cs.Conflicts())
}
