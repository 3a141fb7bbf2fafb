package tier

import (
	"context"
	"fmt"

	"github.com/rewind-io/rewind/engine/internal/record"
)

// Segment is an opened segment object: its footer and index, checked.
type Segment struct {
	Name    string
	Footer  Footer
	Entries []Entry
}

// OpenSegment reads and checks the footer and index of object name (two
// range reads after a size lookup). Errors name the object.
func OpenSegment(ctx context.Context, st Store, name string) (*Segment, error) {
	size, err := st.Size(ctx, name)
	if err != nil {
		return nil, err
	}
	if size < int64(len(magic)+footerSize) {
		return nil, fmt.Errorf("%w: object %s of %d bytes", ErrCorrupt, name, size)
	}
	tail, err := st.ReadRange(ctx, name, size-footerSize, footerSize)
	if err != nil {
		return nil, err
	}
	f, err := ParseFooter(tail, size)
	if err != nil {
		return nil, fmt.Errorf("object %s: %w", name, err)
	}
	pos, n := f.IndexRange()
	idx, err := st.ReadRange(ctx, name, pos, n)
	if err != nil {
		return nil, err
	}
	entries, err := ParseIndex(idx, f)
	if err != nil {
		return nil, fmt.Errorf("object %s: %w", name, err)
	}
	return &Segment{Name: name, Footer: f, Entries: entries}, nil
}

// ReadBatch reads and checks the segment's i-th batch.
func (s *Segment) ReadBatch(ctx context.Context, st Store, i int) (record.Batch, error) {
	e := s.Entries[i]
	data, err := st.ReadRange(ctx, s.Name, int64(e.Pos), int64(e.Len))
	if err != nil {
		return record.Batch{}, fmt.Errorf("object %s, offset %d: %w", s.Name, e.Base, err)
	}
	b, err := CheckBatch(e, data)
	if err != nil {
		return record.Batch{}, fmt.Errorf("object %s: %w", s.Name, err)
	}
	return b, nil
}

// OpenSegmentAt is OpenSegment for an object whose size and batch count
// are known (the manifest records both): the index and the footer come in
// one range read, the last 48 + 36 × count bytes, with no size lookup. An
// object that is not what the caller expects (another size or count) is
// corrupt.
func OpenSegmentAt(ctx context.Context, st Store, name string, size int64, count uint32) (*Segment, error) {
	n := int64(count)*entrySize + footerSize
	if count == 0 || size < int64(len(magic))+n {
		return nil, fmt.Errorf("%w: object %s: %d batches do not fit %d bytes", ErrCorrupt, name, count, size)
	}
	b, err := st.ReadRange(ctx, name, size-n, n)
	if err != nil {
		return nil, err
	}
	f, err := ParseFooter(b[len(b)-footerSize:], size)
	if err != nil {
		return nil, fmt.Errorf("object %s: %w", name, err)
	}
	if f.Count != count {
		return nil, fmt.Errorf("%w: object %s holds %d batches, %d expected", ErrCorrupt, name, f.Count, count)
	}
	entries, err := ParseIndex(b, f)
	if err != nil {
		return nil, fmt.Errorf("object %s: %w", name, err)
	}
	return &Segment{Name: name, Footer: f, Entries: entries}, nil
}
