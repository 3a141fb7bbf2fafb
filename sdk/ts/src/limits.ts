/** The largest message the client sends or reads (64 MiB, as the Go client). */
export const MAX_MESSAGE_BYTES = 64 << 20;
