// Package fastpath is Rewind's unary fast path: the protocol, and the
// client's transport for it (the server's side is the node's
// internal/httpedge).
//
// # Why
//
// A unary Connect call over HTTP/2 cost about 0.3 ms of a 2-core
// machine's time on loopback, with next to nothing behind it (a
// DescribeTopic): HPACK, flow control, a goroutine per request and a
// write hand-off per frame on the server, for a request and an answer of
// a hundred bytes each. An event store's load and conditional append, and
// every small publish, pay it. The fast path carries the same calls at
// 1.8–2.3 times less (in process, on a busy 2-core machine;
// docs/benchmarks.md, "The fast path").
//
// # The protocol
//
// A client opens a stream with one HTTP/1.1 request:
//
//	POST /rewind.fastpath/v1 HTTP/1.1
//	Content-Type: application/x-rewind-fastpath
//	Transfer-Encoding: chunked
//	Expect: 100-continue
//
// The server answers 200 with the same Content-Type and a chunked body,
// and keeps the request open in both directions (full duplex). The
// request's body then carries the client's frames, the response's the
// server's, each frame in one chunk:
//
//	length  uint32  bytes after this field
//	id      uint32  the call; a client's request ids grow
//	kind    uint8   1 request, 2 response, 3 cancel, 4 go-away,
//	                5 ping, 6 pong
//	payload         request: path, header block, body
//	                response: status (uvarint), header block, body
//	                the others: none
//
// Strings are a uvarint length and bytes; a header block is a uvarint
// count of name and value pairs (at most MaxHeaders, MaxHeaderBytes in
// all). Integers of the fixed header are big-endian.
//
// The server runs each request frame as the HTTP request it describes
// (POST, its path and headers, the stream's Host, peer address and TLS
// state) through the node's own handler, so authentication, ACLs, quotas,
// limits, routing, metrics and tracing apply unchanged; the answer goes
// back as one response frame. Calls run concurrently (at most 1,000 out
// per stream), and answers come in the order calls end. A cancel frame
// cancels its call's context. A go-away frame (the node shuts down, or
// the stream was idle for the node's idle timeout) names the last call
// the server will run: the client sends later ones again on a new stream,
// and the server ends the stream once it has answered the others. A ping
// is answered by a pong: a client with calls out on a stream that has
// been silent for its health-check idle time pings it, and ends the
// stream, failing its calls, when the pong does not come in time (a
// paused or cut-off node), as HTTP/2's health checks do.
//
// # Negotiation
//
// A node that serves the fast path says so on every answer (the
// Rewind-Fastpath header). Transport sends its first call to a server the
// usual way and opens a stream only after such an answer; a server that
// then refuses the stream (a proxy between) is called the usual way for a
// minute. Streams (Subscribe) never use the fast path.
package fastpath
