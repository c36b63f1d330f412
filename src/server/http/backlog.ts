// The SDK's transport pushes SSE events into its streams without backpressure, so a client that stops
// reading would make them grow without end. Each response stream is passed through a meter that hands
// bytes to the socket only as fast as the client reads, and counts what waits against one budget per MCP
// session; a stream that pushes the count over the budget is cut (its response is lost, the session lives).

export class Backlog {
  bytes = 0;
  constructor(
    readonly maxBytes: number,
    private readonly onOverflow: () => void,
  ) {}

  overflowed(): void {
    this.onOverflow();
  }
}

export function metered(body: ReadableStream<Uint8Array>, backlog: Backlog): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  const queue: Uint8Array[] = [];
  let ended = false;
  let wake: (() => void) | undefined;
  let failure: Error | undefined;

  const drop = () => {
    for (const chunk of queue) backlog.bytes -= chunk.length;
    queue.length = 0;
  };

  // Reads the SDK's stream as fast as it produces, so its own queue stays empty.
  const pump = async () => {
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        queue.push(value);
        backlog.bytes += value.length;
        if (backlog.bytes > backlog.maxBytes) {
          failure = new Error("the client stopped reading its event stream");
          drop();
          backlog.overflowed();
          await reader.cancel(failure).catch(() => undefined);
          break;
        }
        wake?.();
      }
    } catch (error) {
      failure = error as Error;
    }
    ended = true;
    wake?.();
  };
  void pump();

  // highWaterMark 0: pull runs only when the socket wants more, so `queue` is exactly what waits.
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        while (queue.length === 0 && !ended) await new Promise<void>((resolve) => (wake = resolve));
        wake = undefined;
        const chunk = queue.shift();
        if (chunk) {
          backlog.bytes -= chunk.length;
          controller.enqueue(chunk);
        } else if (failure) controller.error(failure);
        else controller.close();
      },
      cancel(reason) {
        drop();
        ended = true;
        return reader.cancel(reason).catch(() => undefined);
      },
    },
    { highWaterMark: 0 },
  );
}

/** An event-stream response, metered against `backlog`; any other response as it is. */
export function withBoundedStream(response: Response, backlog: Backlog): Response {
  if (!response.body || !(response.headers.get("content-type") ?? "").includes("text/event-stream")) {
    return response;
  }
  return new Response(metered(response.body, backlog), {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  });
}
