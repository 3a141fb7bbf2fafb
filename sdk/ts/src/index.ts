/**
 * The TypeScript client of Rewind, for browsers and Node. This entry point
 * speaks through fetch (connect-web): Connect or gRPC-web, server streaming
 * included. In Node, "@rewind-io/client/node" gives the same client over
 * HTTP/2, with gRPC too.
 *
 *     import { createClient, text } from "@rewind-io/client";
 *     const client = createClient({ baseUrl: "http://127.0.0.1:7070" });
 *     await client.publish("orders", [{ key: "o-1", value: '{"total":12}' }]);
 *     for await (const rec of client.replay("orders", { from: "-15m", to: "end" }).records())
 *       console.log(rec.offset, text(rec.value));
 *
 * @module
 */

import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-web";
import type { Interceptor, Transport } from "@connectrpc/connect";
import { makeClient, type Client, type ClientOptions, type Protocol } from "./client.js";
import { MAX_MESSAGE_BYTES } from "./limits.js";

export * from "./api.js";

/**
 * createClient returns a client of the node at baseUrl, or of the nodes of
 * a cluster. It does not connect until the first call. transport is
 * "connect" (default) or "grpc-web", or your own transport factory.
 */
export function createClient(opts: ClientOptions): Client {
  return makeClient(opts, webTransport);
}

/** webTransport is the fetch-based transport of protocol to baseUrl. */
export function webTransport(protocol: Protocol, baseUrl: string, interceptors: Interceptor[] = []): Transport {
  const common = { baseUrl, useBinaryFormat: true, readMaxBytes: MAX_MESSAGE_BYTES, writeMaxBytes: MAX_MESSAGE_BYTES, interceptors };
  switch (protocol) {
    case "connect":
      return createConnectTransport(common);
    case "grpc-web":
      return createGrpcWebTransport(common);
    case "grpc":
      throw new TypeError('gRPC needs HTTP/2 trailers, which fetch lacks: import createClient from "@rewind-io/client/node", or use "grpc-web"');
  }
  throw new TypeError(`unknown protocol ${String(protocol)}: want "connect" or "grpc-web"`);
}
