package booking

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDecisions: the rules without a server, on folded events.
func TestDecisions(t *testing.T) {
	history := []Event{
		{Type: CourseDefined, Course: "go", Capacity: 2},
		{Type: CourseDefined, Course: "c", Capacity: 9},
		{Type: SeatBooked, Course: "go", Student: "ann"},
		{Type: SeatBooked, Course: "c", Student: "bo"},
		{Type: SeatBooked, Course: "x", Student: "bo"},
		{Type: SeatBooked, Course: "y", Student: "bo"},
	}
	if diff := cmp.Diff(State{Course: "go", Student: "bo", Defined: true, Capacity: 2, Booked: 1, Courses: 3}, Fold("go", "bo", history)); diff != "" {
		t.Fatalf("fold (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		name            string
		course, student string
		events          []Event
		want            Event
		err             error
	}{
		{"book", "go", "cy", history, Event{Type: SeatBooked, Course: "go", Student: "cy"}, nil},
		{"no course", "rust", "cy", history, Event{}, ErrNoCourse},
		{"twice", "go", "ann", history, Event{}, ErrAlreadyBooked},
		{"full", "go", "cy", append(history, Event{Type: SeatBooked, Course: "go", Student: "dee"}), Event{}, ErrCourseFull},
		{"too many", "go", "bo", history, Event{}, ErrTooManyCourses},
	} {
		got, err := Fold(tc.course, tc.student, tc.events).Book()
		if !errors.Is(err, tc.err) || got != tc.want {
			t.Errorf("%s: %+v, %v; want %+v, %v", tc.name, got, err, tc.want, tc.err)
		}
	}
	if _, err := Fold("go", "", history).Define(5); !errors.Is(err, ErrCourseExists) {
		t.Errorf("define a course again: %v", err)
	}
	if _, err := Fold("new", "", history).Define(0); !errors.Is(err, ErrInvalidCapacity) {
		t.Errorf("define a course of no seats: %v", err)
	}
	if got, err := Fold("new", "", history).Define(5); err != nil || got != (Event{Type: CourseDefined, Course: "new", Capacity: 5}) {
		t.Errorf("define a new course: %+v %v", got, err)
	}
}
