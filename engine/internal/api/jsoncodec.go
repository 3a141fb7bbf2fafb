package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// jsonCodec is the Connect JSON codec of the public services: protojson,
// as connect's own, but answers carry every scalar field, zero values
// included. A JSON client then reads "partition": 0 rather than finding
// the key missing (protojson's default leaves zero values out, so a
// record in partition 0, offset 0 looked like one without either).
// Requests are read as connect reads them: unknown fields are ignored.
type jsonCodec struct{ name string }

// jsonCodecs are the codec under both names connect serves JSON by.
func jsonCodecs() []connect.HandlerOption {
	return []connect.HandlerOption{
		connect.WithCodec(jsonCodec{"json"}),
		connect.WithCodec(jsonCodec{"json; charset=utf-8"}),
	}
}

var marshalJSON = protojson.MarshalOptions{EmitDefaultValues: true}

func (c jsonCodec) Name() string { return c.name }

func (c jsonCodec) Marshal(m any) ([]byte, error) {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("json codec: %T is not a protobuf message", m)
	}
	return marshalJSON.Marshal(pm)
}

func (c jsonCodec) MarshalAppend(dst []byte, m any) ([]byte, error) {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("json codec: %T is not a protobuf message", m)
	}
	return marshalJSON.MarshalAppend(dst, pm)
}

func (c jsonCodec) Unmarshal(b []byte, m any) error {
	pm, ok := m.(proto.Message)
	if !ok {
		return fmt.Errorf("json codec: %T is not a protobuf message", m)
	}
	if len(b) == 0 {
		return errors.New("zero-length payload is not a valid JSON object")
	}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, pm); err != nil {
		return fmt.Errorf("unmarshal into %T: %w", m, err)
	}
	return nil
}

// MarshalStable and IsBinary let connect use the codec for GET requests.
func (c jsonCodec) MarshalStable(m any) ([]byte, error) {
	b, err := c.Marshal(m)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

func (c jsonCodec) IsBinary() bool { return false }
