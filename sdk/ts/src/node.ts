/**
 * The Node entry point: the client of "@rewind-io/client" over HTTP/2
 * (h2c for http:// addresses), with gRPC besides Connect and gRPC-web, and
 * HTTP/2 pings that notice a node that stopped answering (its streams then
 * go on through another node).
 *
 *     import { createClient } from "@rewind-io/client/node";
 *     const client = createClient({ nodes: ["127.0.0.1:7071", "127.0.0.1:7072"], transport: "grpc" });
 *
 * @module
 */

import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import type { Interceptor, Transport } from "@connectrpc/connect";
import { makeClient, type Client, type ClientOptions, type Protocol } from "./client.js";
import { MAX_MESSAGE_BYTES } from "./limits.js";

export * from "./api.js";

/**
 * createClient returns a client of the node at baseUrl, or of the nodes of
 * a cluster, over HTTP/2. transport is "connect" (default), "grpc" or
 * "grpc-web", or your own transport factory.
 */
export function createClient(opts: ClientOptions): Client {
  return makeClient(opts, nodeTransport);
}

/**
 * nodeTransport is the HTTP/2 transport of protocol to baseUrl. A
 * connection that received nothing for 2 s is pinged, and closed when the
 * ping is not answered within 2 s.
 */
export function nodeTransport(protocol: Protocol, baseUrl: string, interceptors: Interceptor[] = []): Transport {
  const common = {
    baseUrl,
    interceptors,
    httpVersion: "2" as const,
    useBinaryFormat: true,
    readMaxBytes: MAX_MESSAGE_BYTES,
    writeMaxBytes: MAX_MESSAGE_BYTES,
    pingIntervalMs: 2000,
    pingTimeoutMs: 2000,
    pingIdleConnection: true,
  };
  switch (protocol) {
    case "connect":
      return createConnectTransport(common);
    case "grpc":
      return createGrpcTransport(common);
    case "grpc-web":
      return createGrpcWebTransport(common);
  }
  throw new TypeError(`unknown protocol ${String(protocol)}: want "connect", "grpc" or "grpc-web"`);
}
