// A POST body read under the MCP message limit: refused from its declared length when it can be, else
// as soon as the bytes read pass the limit, never buffered beyond it.

export type Body = { json: unknown } | { status: 400 | 413; code: number; message: string };

export async function readJsonBody(request: Request, maxBytes: number): Promise<Body> {
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
    for await (const chunk of request.body) {
      size += chunk.length;
      if (size > maxBytes) return tooLarge;
      chunks.push(chunk);
    }
  }
  try {
    const text = new TextDecoder("utf-8", { fatal: true }).decode(Buffer.concat(chunks));
    return { json: JSON.parse(text) };
  } catch {
    return { status: 400, code: -32700, message: "Parse error: the body is not UTF-8 JSON" };
  }
}
