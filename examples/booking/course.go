// Package booking is an example of dynamic consistency boundaries (DCB)
// on Rewind's event store: students book seats in courses under rules
// that no single entity's history can check alone.
//
//   - A course id is defined once (as a username is claimed once).
//   - A course takes at most its capacity of students.
//   - A student books at most MaxCourses courses.
//
// An aggregate per course could not check the third rule, and one per
// student not the second. Instead each decision reads the events that
// matter to it, selected by a query over types and tags (client.Query),
// and appends only if no event matching that query was appended since
// the read (client.FailIfMatched with the read's position). The
// consistency boundary is the query, drawn anew for each decision:
//
//  1. Read: Query returns the matching events and the partition's
//     position.
//  2. Decide: fold the events into a State and decide (pure; this file).
//  3. Append with FailIfMatched(query, &position). A *client.ConditionError
//     means a matching event came in between: go back to 1.
//
// Queries and their conditions hold within one partition, so the topic
// has one partition.
package booking

import (
	"errors"
	"fmt"
)

// The event types: each record's Type (its rewind-type header).
const (
	CourseDefined = "CourseDefined"
	SeatBooked    = "SeatBooked"
)

// MaxCourses is how many courses a student may book.
const MaxCourses = 3

// Event is one fact. Its record carries the tags "course:<Course>" and,
// for a booking, "student:<Student>", which the queries select by.
type Event struct {
	Type     string `json:"-"`
	Course   string `json:"course"`
	Capacity int    `json:"capacity,omitempty"` // CourseDefined
	Student  string `json:"student,omitempty"`  // SeatBooked
}

// Tags returns the tags of e's record.
func (e Event) Tags() []string {
	if e.Student == "" {
		return []string{CourseTag(e.Course)}
	}
	return []string{CourseTag(e.Course), StudentTag(e.Student)}
}

// CourseTag and StudentTag are the tags of the events of a course and of
// a student.
func CourseTag(course string) string   { return "course:" + course }
func StudentTag(student string) string { return "student:" + student }

// Errors of the decisions: a command refused, nothing appended.
var (
	ErrCourseExists    = errors.New("booking: course already defined")
	ErrInvalidCapacity = errors.New("booking: capacity must be positive")
	ErrNoCourse        = errors.New("booking: no such course")
	ErrCourseFull      = errors.New("booking: course full")
	ErrAlreadyBooked   = errors.New("booking: student already booked the course")
	ErrTooManyCourses  = errors.New("booking: student booked too many courses")
)

// State is what one course and one student's events say, all a decision
// needs.
type State struct {
	Course, Student string
	Defined         bool // the course exists
	Capacity        int  // the course's seats
	Booked          int  // seats taken in the course
	HasSeat         bool // the student holds one of them
	Courses         int  // courses the student has booked
}

// Fold returns the state events (oldest first) give course and student.
// Events of other courses count only as the student's bookings.
func Fold(course, student string, events []Event) State {
	s := State{Course: course, Student: student}
	for _, e := range events {
		switch e.Type {
		case CourseDefined:
			if e.Course == course {
				s.Defined, s.Capacity = true, e.Capacity
			}
		case SeatBooked:
			if e.Course == course {
				s.Booked++
				s.HasSeat = s.HasSeat || e.Student == student
			}
			if e.Student == student {
				s.Courses++
			}
		}
	}
	return s
}

// Define decides to define the course with capacity seats.
func (s State) Define(capacity int) (Event, error) {
	switch {
	case s.Defined:
		return Event{}, fmt.Errorf("%w: %s", ErrCourseExists, s.Course)
	case capacity <= 0:
		return Event{}, fmt.Errorf("%w: %d", ErrInvalidCapacity, capacity)
	}
	return Event{Type: CourseDefined, Course: s.Course, Capacity: capacity}, nil
}

// Book decides to give the student a seat in the course.
func (s State) Book() (Event, error) {
	switch {
	case !s.Defined:
		return Event{}, fmt.Errorf("%w: %s", ErrNoCourse, s.Course)
	case s.HasSeat:
		return Event{}, fmt.Errorf("%w: %s in %s", ErrAlreadyBooked, s.Student, s.Course)
	case s.Booked >= s.Capacity:
		return Event{}, fmt.Errorf("%w: %s has %d seats", ErrCourseFull, s.Course, s.Capacity)
	case s.Courses >= MaxCourses:
		return Event{}, fmt.Errorf("%w: %s has %d", ErrTooManyCourses, s.Student, s.Courses)
	}
	return Event{Type: SeatBooked, Course: s.Course, Student: s.Student}, nil
}
