package main

import (
	"strings"
	"testing"
)

// TestKafkaFlags: --kafka-listen follows the listen-safety rule of
// --listen (loopback, or --insecure) and is refused with --auth; a bad
// --kafka-advertise or one without --kafka-listen is refused.
func TestKafkaFlags(t *testing.T) {
	for _, tc := range []struct {
		name              string
		listen, advertise string
		auth, insecure    bool
		want              string // "" for success
	}{
		{"loopback", "127.0.0.1:0", "", false, false, ""},
		{"loopback with advertise", "127.0.0.1:0", "kafka.example:9092", false, false, ""},
		{"off", "", "", true, false, ""},
		{"with auth", "127.0.0.1:0", "", true, false, "no authentication yet"},
		{"exposed", "0.0.0.0:0", "", false, false, "refusing to serve Kafka on 0.0.0.0:0"},
		{"exposed, insecure", "0.0.0.0:0", "", false, true, ""},
		{"advertise alone", "", "h:1", false, false, "--kafka-advertise needs --kafka-listen"},
		{"bad advertise", "127.0.0.1:0", "nohost", false, false, "--kafka-advertise"},
		{"advertise port 0", "127.0.0.1:0", "h:0", false, false, "port must be 1 to 65535"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := kafkaFlags{listen: tc.listen, advertise: tc.advertise}
			err := k.bind(tc.auth, tc.insecure)
			defer k.close()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
