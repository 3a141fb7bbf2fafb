// Command demo runs the booking example against a Rewind server: it
// defines a course id twice, lets eight students race for its two seats,
// and shows a student stopped at booking.MaxCourses.
//
//	go run ./cmd/rewind serve                         # in one terminal
//	go run ./examples/booking/demo -addr http://127.0.0.1:7070
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"strconv"
	"sync"
	"time"

	"github.com/rewind-io/rewind/examples/booking"
	"github.com/rewind-io/rewind/sdk/client"
)

func main() {
	addr := flag.String("addr", "http://127.0.0.1:7070", "the server's address")
	topic := flag.String("topic", "courses", "the topic (created with one partition if missing)")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, client.New(*addr), *topic); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, c *client.Client, topic string) error {
	cs := booking.New(c, topic)
	if err := cs.CreateTopic(ctx); err != nil {
		return err
	}
	// Fresh ids on each run, so the demo can run again on the same topic.
	run := strconv.FormatInt(time.Now().Unix(), 36)
	course := "go-101-" + run

	step := func(what string, err error) {
		if err != nil {
			fmt.Printf("%-40s refused: %v\n", what, err)
			return
		}
		fmt.Printf("%-40s ok\n", what)
	}
	step("define "+course+" (2 seats)", cs.DefineCourse(ctx, course, 2))
	step("define "+course+" again", cs.DefineCourse(ctx, course, 50))

	// Eight students race for two seats: each reads the course's bookings
	// and appends only if no booking came in since. Exactly two win.
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := range 8 {
		wg.Go(func() {
			student := fmt.Sprintf("student-%d-%s", i, run)
			err := cs.Book(ctx, course, student)
			mu.Lock()
			defer mu.Unlock()
			step("book "+student, err)
		})
	}
	wg.Wait()

	// One student tries five courses: the quota's boundary is the
	// student's bookings, across courses.
	sam := "sam-" + run
	for i := range 5 {
		elective := fmt.Sprintf("elective-%d-%s", i, run)
		if err := cs.DefineCourse(ctx, elective, 10); err != nil {
			return err
		}
		step("book "+elective+" for sam", cs.Book(ctx, elective, sam))
	}
	fmt.Printf("%d appends retried after a conflict\n", cs.Conflicts())

	// The bookings of the course, as a query reads them.
	r, err := c.Query(ctx, topic, client.Query{{Types: []string{booking.SeatBooked}, Tags: []string{booking.CourseTag(course)}}})
	if err != nil {
		return err
	}
	fmt.Println("seats of", course+":")
	for _, rec := range r.Records {
		e, err := booking.Decode(rec)
		if err != nil {
			return err
		}
		fmt.Printf("  offset %d: %s\n", rec.Offset, e.Student)
	}
	return nil
}
