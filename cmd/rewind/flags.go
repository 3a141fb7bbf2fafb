package main

// Flag types that refuse what the API cannot carry, the checks that every
// command group makes of a mistyped subcommand, and the count words of the
// CLI's messages.

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

// parsePartition reads a partition number: 0 to 4294967295 (a uint32, as
// the API carries it). A negative or larger number is an error, never a
// value wrapped into range.
func parsePartition(s string) (uint32, error) {
	s = strings.TrimSpace(s)
	n, err := strconv.ParseUint(s, 10, 32)
	if err == nil {
		return uint32(n), nil
	}
	if strings.HasPrefix(s, "-") {
		if _, err := strconv.ParseInt(s, 10, 64); err == nil || errors.Is(err, strconv.ErrRange) {
			return 0, fmt.Errorf("partition %s is negative (partitions are 0 to %d)", s, uint32(math.MaxUint32))
		}
	}
	if errors.Is(err, strconv.ErrRange) {
		return 0, fmt.Errorf("partition %s is out of range (partitions are 0 to %d)", s, uint32(math.MaxUint32))
	}
	return 0, fmt.Errorf("%q is not a partition number", s)
}

// partitionsFlag is a repeatable --partition: each value (or each of a
// comma-separated list) is a partition number, checked by parsePartition.
type partitionsFlag []uint32

func (p *partitionsFlag) String() string {
	s := make([]string, len(*p))
	for i, v := range *p {
		s[i] = strconv.FormatUint(uint64(v), 10)
	}
	return "[" + strings.Join(s, ",") + "]"
}

func (p *partitionsFlag) Set(s string) error {
	for _, f := range strings.Split(s, ",") {
		v, err := parsePartition(f)
		if err != nil {
			return err
		}
		*p = append(*p, v)
	}
	return nil
}

func (p *partitionsFlag) Type() string { return "partition" }

// partitionFlag is a single optional --partition; nil until given.
type partitionFlag struct{ p *uint32 }

func (f *partitionFlag) String() string {
	if f.p == nil {
		return ""
	}
	return strconv.FormatUint(uint64(*f.p), 10)
}

func (f *partitionFlag) Set(s string) error {
	v, err := parsePartition(s)
	if err != nil {
		return err
	}
	f.p = &v
	return nil
}

func (f *partitionFlag) Type() string { return "partition" }

// requireKnownSubcommands makes every command group under root (a command
// with subcommands and nothing to run of its own) refuse an unknown
// subcommand with an error and suggestions, as cobra does for the root
// alone; without an argument the group still prints its help. Without
// this, `rewind topic lst` printed help and exited 0, and scripts missed
// the typo.
func requireKnownSubcommands(root *cobra.Command) {
	for _, c := range root.Commands() {
		requireKnownSubcommands(c)
	}
	if root.Runnable() || !root.HasSubCommands() || !root.HasParent() {
		return
	}
	root.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		if cmd.SuggestionsMinimumDistance <= 0 {
			cmd.SuggestionsMinimumDistance = 2 // cobra's default for the root
		}
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t")
		}
		return fmt.Errorf("%s\n\nRun '%s --help' for usage", msg, cmd.CommandPath())
	}
	root.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
}

// plural renders a count with its noun: "1 record", "2 records".
func plural[N ~int | ~int64 | ~uint32 | ~uint64](n N, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
