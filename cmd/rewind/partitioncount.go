package main

import (
	"fmt"
	"strconv"
	"strings"
)

// maxPartitions is the most partitions a topic may have: the server's
// limit (broker.MaxPartitions), for the messages and help of the CLI.
const maxPartitions = 1024

// partitionCount is a --partitions flag: a count of partitions. It refuses
// what is no number or does not fit the API's uint32 with the range in its
// message (instead of strconv's); a count that fits goes to the server,
// which checks the range (InvalidArgument).
type partitionCount uint32

func (c *partitionCount) String() string { return strconv.FormatUint(uint64(*c), 10) }

func (c *partitionCount) Set(s string) error {
	n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 32)
	if err != nil {
		return fmt.Errorf("%s is not a partition count: use a whole number from 1 to %d", s, maxPartitions)
	}
	*c = partitionCount(n)
	return nil
}

func (c *partitionCount) Type() string { return "count" }
