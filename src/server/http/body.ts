// A POST body read under the MCP message limit: refused from its declared length when it can be, else
// as soon as the bytes read pass the limit, never buffered beyond it. It must also arrive whole within a
// deadline: the connection's idle timeout is lifted for the event stream that answers a request, and a
// client sending one byte now and then would otherwise hold its socket (and this read) forever.

export type Body =
  | { json: unknown }
  | { status: 400 | 408 | 413; code: number; message: string; headers?: Record<string, string> };

export async function readJsonBody(request: Request, maxBytes: number, deadlineMs: number): Promise<Body> {
  const tooLarge = {
    status: 413 as const,
    code: -32600,
    message: `Request body exceeds the ${maxBytes}-byte MCP message limit`,
  };
  const declared = Number(request.headers.get("content-length") ?? Number.NaN);
  if (declared > maxBytes) return tooLarge;
  const chunks: Uint8Array[] = [];
  let size = 0;
  if (request.body) {
    const reader = request.body.getReader();
    let timer: ReturnType<typeof setTimeout> | undefined;
    let whole = false;
    const late = new Promise<"late">((resolve) => {
      timer = setTimeout(() => resolve("late"), deadlineMs);
    });
    try {
      for (;;) {
        const next = await Promise.race([reader.read(), late]);
        if (next === "late") {
          return {
            status: 408,
            code: -32600,
            message: `Request body did not arrive within ${deadlineMs / 1000} s`,
            // The rest of the body may still be on its way: the connection cannot carry another request.
            headers: { connection: "close" },
          };
        }
        if (next.done) {
          whole = true;
          break;
        }
        size += next.value.length;
        if (size > maxBytes) return tooLarge;
        chunks.push(next.value);
      }
    } finally {
      clearTimeout(timer);
      if (!whole) void reader.cancel().catch(() => {});
    }
  }
  try {
    const text = new TextDecoder("utf-8", { fatal: true }).decode(Buffer.concat(chunks));
    return { json: JSON.parse(text) };
  } catch {
    return { status: 400, code: -32700, message: "Parse error: the body is not UTF-8 JSON" };
  }
}
