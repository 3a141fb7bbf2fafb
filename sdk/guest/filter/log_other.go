//go:build !wasip1

package filter

import "os"

func writeLog(msg string) {
	os.Stderr.WriteString("rewind guest: " + msg + "\n")
}
