package partition

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/rewind-io/rewind/engine/internal/record"
)

// Conditional appends (see keyindex.go for the indexes they read).
//
// An append may carry conditions: on keys (an expected last version) and
// on tags (no record matching a query after a position). Such an append is
// proposed alone, as one batch, in an entry of kind kindBatchExt whose
// extension carries the conditions; apply evaluates them against the
// indexes as every entry before it left them, so every replica decides the
// same, and skips the whole batch (no offset taken) when one fails: all or
// nothing. The proposer does not pre-check: apply is the only judge.

// Expectation is what a key condition expects of the key's history.
type Expectation uint8

const (
	// ExpectAny accepts any history (the condition is a no-op).
	ExpectAny Expectation = iota
	// ExpectNone requires that the key has no record.
	ExpectNone
	// ExpectExists requires that the key has at least one record.
	ExpectExists
	// ExpectVersion requires that the key's last version is Version.
	ExpectVersion
)

func (e Expectation) String() string {
	switch e {
	case ExpectAny:
		return "any"
	case ExpectNone:
		return "none"
	case ExpectExists:
		return "exists"
	case ExpectVersion:
		return "version"
	}
	return fmt.Sprintf("expectation(%d)", uint8(e))
}

// KeyCondition expects something of one key's last version.
type KeyCondition struct {
	Key     []byte
	Expect  Expectation
	Version uint64 // with ExpectVersion
}

func (c KeyCondition) describe() string {
	if c.Expect == ExpectVersion {
		return fmt.Sprintf("version %d", c.Version)
	}
	return c.Expect.String()
}

// QueryItem matches a record whose type is one of Types (any type when
// empty) and that carries every tag of Tags. An item with neither matches
// nothing.
type QueryItem struct {
	Types []string
	Tags  []string
}

// Query matches a record that any of its items matches.
type Query []QueryItem

func (q Query) String() string {
	var b strings.Builder
	for i, it := range q {
		if i > 0 {
			b.WriteString(" or ")
		}
		fmt.Fprintf(&b, "(types %v, tags %v)", it.Types, it.Tags)
	}
	return b.String()
}

// NoPosition is a TagCondition's After when the reader saw no position: no
// matching record may exist at all.
const NoPosition = -1

// TagCondition fails when a record matching Query exists at an offset
// greater than After (NoPosition: at any offset).
type TagCondition struct {
	Query Query
	After int64
}

// Conditions are the conditions of one append.
type Conditions struct {
	Keys []KeyCondition
	Tags []TagCondition
}

// Empty reports whether there is nothing to check.
func (c *Conditions) Empty() bool { return c == nil || len(c.Keys) == 0 && len(c.Tags) == 0 }

// ErrCondition marks an append refused because a condition failed.
var ErrCondition = errors.New("partition: append condition failed")

// ErrNoKeyIndex refuses what needs the key index (conditions, key reads)
// in a partition that keeps none (Config.KeyIndex).
var ErrNoKeyIndex = errors.New("the topic keeps no key index (created without one, or before Rewind had it): key versions, conditional appends and key reads need it")

// ConditionError says which condition failed and what the log holds.
type ConditionError struct {
	// A key condition: the key, what was expected, and the key's actual
	// last version (Exists false: the key has no record).
	Key      []byte
	Expected KeyCondition
	Actual   uint64
	Exists   bool
	// A tag condition (Tag true): its query and position, and the offset
	// of a matching record after it.
	Tag    bool
	Query  Query
	After  int64
	Offset uint64
}

func (e *ConditionError) Error() string {
	if e.Tag {
		after := "at all"
		if e.After != NoPosition {
			after = fmt.Sprintf("after offset %d", e.After)
		}
		return fmt.Sprintf("append condition failed: a record matching %s exists %s (offset %d)", e.Query, after, e.Offset)
	}
	actual := "none (the key has no record)"
	if e.Exists {
		actual = fmt.Sprintf("version %d", e.Actual)
	}
	return fmt.Sprintf("append condition failed: key %q expected %s, actual %s", e.Key, e.Expected.describe(), actual)
}

// Is makes a ConditionError an ErrCondition.
func (e *ConditionError) Is(target error) bool { return target == ErrCondition }

// ghost is what a rewritten batch keeps of a record it dropped: what the
// indexes took from it (offset delta, key, index terms), so that a replica
// that applies the rewritten entry indexes the batch as the leader did
// from the original (versions and tag conditions stay deterministic).
type ghost struct {
	delta uint32
	key   []byte
	terms [][]byte
}

// batchExt is the extension of a kindBatchExt entry.
type batchExt struct {
	conds  Conditions
	ghosts []ghost
}

// maxExt bounds what decodeExt accepts of any one count, against corrupt
// lengths.
const maxExt = 1 << 24

func (x *batchExt) encode() []byte {
	var b []byte
	bs := func(v []byte) { b = binary.AppendUvarint(b, uint64(len(v))); b = append(b, v...) }
	strs := func(v []string) {
		b = binary.AppendUvarint(b, uint64(len(v)))
		for _, s := range v {
			bs([]byte(s))
		}
	}
	b = binary.AppendUvarint(b, uint64(len(x.conds.Keys)))
	for _, c := range x.conds.Keys {
		bs(c.Key)
		b = append(b, byte(c.Expect))
		b = binary.AppendUvarint(b, c.Version)
	}
	b = binary.AppendUvarint(b, uint64(len(x.conds.Tags)))
	for _, c := range x.conds.Tags {
		b = binary.AppendVarint(b, c.After)
		b = binary.AppendUvarint(b, uint64(len(c.Query)))
		for _, it := range c.Query {
			strs(it.Types)
			strs(it.Tags)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(x.ghosts)))
	for _, g := range x.ghosts {
		b = binary.AppendUvarint(b, uint64(g.delta))
		bs(g.key)
		b = binary.AppendUvarint(b, uint64(len(g.terms)))
		for _, t := range g.terms {
			bs(t)
		}
	}
	return b
}

type extDecoder struct {
	b   []byte
	err error
}

func (d *extDecoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errors.New("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *extDecoder) count() int {
	v := d.uvarint()
	if v > maxExt || v > uint64(len(d.b)) {
		if d.err == nil {
			d.err = fmt.Errorf("count %d out of range", v)
		}
		return 0
	}
	return int(v)
}

func (d *extDecoder) bytes() []byte {
	n := d.count()
	if d.err != nil {
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *extDecoder) strs() []string {
	n := d.count()
	var out []string
	for range n {
		out = append(out, string(d.bytes()))
	}
	return out
}

func decodeExt(b []byte) (batchExt, error) {
	d := extDecoder{b: b}
	var x batchExt
	for range d.count() {
		c := KeyCondition{Key: d.bytes()}
		if len(d.b) == 0 {
			d.err = errors.New("truncated")
			break
		}
		c.Expect = Expectation(d.b[0])
		d.b = d.b[1:]
		c.Version = d.uvarint()
		if c.Expect > ExpectVersion && d.err == nil {
			d.err = fmt.Errorf("unknown expectation %d", c.Expect)
		}
		x.conds.Keys = append(x.conds.Keys, c)
	}
	for range d.count() {
		var c TagCondition
		if d.err == nil {
			v, n := binary.Varint(d.b)
			if n <= 0 {
				d.err = errors.New("bad varint")
			} else {
				c.After, d.b = v, d.b[n:]
			}
		}
		for range d.count() {
			c.Query = append(c.Query, QueryItem{Types: d.strs(), Tags: d.strs()})
		}
		x.conds.Tags = append(x.conds.Tags, c)
	}
	for range d.count() {
		g := ghost{delta: uint32(d.uvarint()), key: d.bytes()}
		for range d.count() {
			g.terms = append(g.terms, d.bytes())
		}
		x.ghosts = append(x.ghosts, g)
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%d trailing bytes", len(d.b))
	}
	if d.err != nil {
		return batchExt{}, fmt.Errorf("%w: batch extension: %v", ErrCorrupt, d.err)
	}
	return x, nil
}

// batchEntry is a parsed batch entry: kindBatch (a 9-byte envelope) or
// kindBatchExt (the envelope, then a uvarint length and the extension).
type batchEntry struct {
	checked uint64 // raft index the proposer's dedupe check saw
	ext     []byte // encoded batchExt, nil for kindBatch
	batch   []byte // the record batch
}

// isBatchKind reports whether an entry's kind byte is a record batch's.
func isBatchKind(k byte) bool { return k == kindBatch || k == kindBatchExt }

func parseBatchEntry(data []byte) (batchEntry, error) {
	if len(data) < batchEnvelope || !isBatchKind(data[0]) {
		return batchEntry{}, fmt.Errorf("%w: not a batch entry", ErrCorrupt)
	}
	e := batchEntry{checked: binary.LittleEndian.Uint64(data[1:]), batch: data[batchEnvelope:]}
	if data[0] == kindBatchExt {
		n, k := binary.Uvarint(e.batch)
		if k <= 0 || n > uint64(len(e.batch)-k) {
			return batchEntry{}, fmt.Errorf("%w: batch extension length", ErrCorrupt)
		}
		e.ext, e.batch = e.batch[k:k+int(n)], e.batch[k+int(n):]
	}
	return e, nil
}

// encodeBatchEntry builds a batch entry: kindBatch when ext is empty.
func encodeBatchEntry(checked uint64, ext, batch []byte) []byte {
	kind := byte(kindBatch)
	n := batchEnvelope + len(batch)
	if len(ext) > 0 {
		kind = kindBatchExt
		n += binary.MaxVarintLen64 + len(ext)
	}
	entry := make([]byte, batchEnvelope, n)
	entry[0] = kind
	binary.LittleEndian.PutUint64(entry[1:], checked)
	if len(ext) > 0 {
		entry = binary.AppendUvarint(entry, uint64(len(ext)))
		entry = append(entry, ext...)
	}
	return append(entry, batch...)
}

// ghostsOf returns the ghosts of b's records that drop selects and that the
// indexes know (a key or an index term).
func ghostsOf(b record.Batch, drop func(delta uint32) bool) ([]ghost, error) {
	var out []ghost
	it := b.Iter()
	var r record.Record
	for it.Next(&r) {
		if !drop(r.OffsetDelta) {
			continue
		}
		terms := IndexTerms(&r)
		if len(r.Key) == 0 && len(terms) == 0 {
			continue
		}
		out = append(out, ghost{delta: r.OffsetDelta, key: append([]byte(nil), r.Key...), terms: terms})
	}
	return out, it.Err()
}

// mergeGhosts merges two delta-ordered ghost lists (their deltas are
// distinct: a record is dropped once).
func mergeGhosts(a, b []ghost) []ghost {
	if len(a) == 0 {
		return b
	}
	out := make([]ghost, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		if j == len(b) || i < len(a) && a[i].delta < b[j].delta {
			out = append(out, a[i])
			i++
		} else {
			out = append(out, b[j])
			j++
		}
	}
	return out
}
