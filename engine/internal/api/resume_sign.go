package api

import (
	"context"
	"strings"

	"github.com/rewind-io/rewind/engine/internal/auth"
	"github.com/rewind-io/rewind/engine/internal/stream"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

// With auth on, every resume token a stream hands out is signed (an HMAC
// under the metadata group's key, auth.SignResume): presenting a signed
// token needs only the read right, since it continues a stream the caller
// was allowed to read, while an unsigned or forged one is a start in
// history and needs replay (subscribeNeeds).

// signing returns the sink a stream sends through: out itself with auth
// off, else one that signs the resume tokens of the events.
func (s *Server) signing(ctx context.Context, out stream.Sink) stream.Sink {
	if s.guard == nil {
		return out
	}
	k := &signingSink{out: out, key: s.guard.state().ResumeKey}
	if id, ok := auth.FromContext(ctx); ok {
		k.principal = id.Principal
	}
	return k
}

// signingSink signs for the stream's principal: the token is signed for
// it alone.
type signingSink struct {
	out       stream.Sink
	key       []byte
	principal string
}

func (k *signingSink) Send(resp *rewindv1.SubscribeResponse) error {
	switch e := resp.GetEvent().(type) {
	case *rewindv1.SubscribeResponse_Started:
		e.Started.ResumeToken = auth.SignResume(k.key, k.principal, e.Started.GetResumeToken())
	case *rewindv1.SubscribeResponse_Records:
		e.Records.ResumeToken = auth.SignResume(k.key, k.principal, e.Records.GetResumeToken())
	case *rewindv1.SubscribeResponse_Progress:
		e.Progress.ResumeToken = auth.SignResume(k.key, k.principal, e.Progress.GetResumeToken())
	case *rewindv1.SubscribeResponse_End:
		e.End.ResumeToken = auth.SignResume(k.key, k.principal, e.End.GetResumeToken())
	}
	return k.out.Send(resp)
}

// unsigned strips a resume token's signature, if it has one.
func unsigned(token string) string {
	t, _, _ := strings.Cut(token, ".")
	return t
}
