package client_test

import (
	"fmt"

	"github.com/rewind-io/rewind/sdk/client"
)

// The examples that talk to a server (Example, ExampleClient_Subscribe_resume,
// ExamplePublisher) run against a real node in internal/cliente2e: this
// module does not depend on the server.

func ExampleParsePosition() {
	for _, s := range []string{"earliest", "42", "@2026-11-30T10:00:00Z", "-15m", "-100", "id:AQEBAHbr"} {
		p, err := client.ParsePosition(s)
		fmt.Println(p, err)
	}
	// Output:
	// earliest <nil>
	// 42 <nil>
	// @2026-11-30T10:00:00Z <nil>
	// -15m0s <nil>
	// -100 <nil>
	// id:AQEBAHbr <nil>
}
