// Approvals over Streamable HTTP (--transport http), in both eras, with the SDK's client answering the
// form: under 2025-11-25 the elicitation/create travels on the tool call's own response stream; under
// 2026-07-28 every round is a request of its own (each served by a fresh server instance), so the parked
// call must be found again by the retry. The peer's log says the call went exactly once. A raw 2025-11-25
// client that opens no standalone stream still gets the form on the call's stream, and its withdrawal
// there when the person answers on the viewer page instead.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { waitFor } from "../support/harness.ts";
import { HttpServer } from "../support/http.ts";
import { createIssueCell, PeerCalls } from "../support/peer-calls.ts";
import { EventReader, parseViewerLine, type ViewerAddress } from "../support/viewer.ts";

const calls = new PeerCalls();
let server: HttpServer;
beforeAll(async () => {
  server = await HttpServer.start(["--viewer"], {}, (project) =>
    writeFileSync(
      join(project, ".mcp.json"),
      JSON.stringify({ mcpServers: { typed: calls.entry({ approve: "writes" }) } }),
    ),
  );
});
afterAll(async () => {
  await server.stop();
  calls.remove();
});

for (const era of ["legacy", "modern"] as const) {
  test(`${era}: the form reaches the client over HTTP and the allowed call goes once`, async () => {
    const messages: string[] = [];
    const client = await server.connect(server.auth, {
      era,
      capabilities: { elicitation: { form: {} } },
      beforeConnect: (sdk) =>
        sdk.setRequestHandler("elicitation/create", async (request) => {
          messages.push((request.params as { message: string }).message);
          return { action: "accept", content: { decision: "allow_once" } } as never;
        }),
    });
    const before = calls.tools().length;
    const result = await client.run(createIssueCell(`over http, ${era}`));
    expect(result.value).toBe("sent");
    expect(messages).toHaveLength(1);
    expect(messages[0]).toContain("typed.create_issue");
    expect(calls.tools().length).toBe(before + 1);
  }, 60_000);
}

/** The JSON-RPC messages of one SSE response body, as they arrive. */
function sseMessages(response: Response): { messages: Record<string, any>[]; done: Promise<void> } {
  const messages: Record<string, any>[] = [];
  const done = (async () => {
    const decoder = new TextDecoder();
    let buffered = "";
    for await (const chunk of response.body as ReadableStream<Uint8Array>) {
      buffered += decoder.decode(chunk, { stream: true });
      let end = buffered.indexOf("\n\n");
      while (end !== -1) {
        const data = buffered
          .slice(0, end)
          .split("\n")
          .filter((line) => line.startsWith("data: "))
          .map((line) => line.slice(6))
          .join("\n");
        if (data) messages.push(JSON.parse(data));
        buffered = buffered.slice(end + 2);
        end = buffered.indexOf("\n\n");
      }
    }
  })();
  return { messages, done };
}

test("legacy, no standalone stream: the form comes on the call's stream, and is withdrawn there when the page answers", async () => {
  await waitFor(() => parseViewerLine(server.stderr) !== undefined, { what: "the viewer line" });
  const page = new EventReader(parseViewerLine(server.stderr) as ViewerAddress);
  try {
    await waitFor(() => page.of("hello").length > 0, { what: "the page's snapshot" });
    const opened = await server.post(
      JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: {
          protocolVersion: "2025-11-25",
          capabilities: { elicitation: { form: {} } },
          clientInfo: { name: "raw", version: "0" },
        },
      }),
    );
    await opened.text();
    // A client that never opens the optional GET stream: only the call's own response reaches it.
    const headers = {
      "mcp-session-id": opened.headers.get("mcp-session-id") as string,
      "mcp-protocol-version": "2025-11-25",
    };
    await (
      await server.post(JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }), headers)
    ).text();
    const before = calls.tools().length;
    const call = await server.post(
      JSON.stringify({
        jsonrpc: "2.0",
        id: 2,
        method: "tools/call",
        params: { name: "execute_python", arguments: { code: createIssueCell("raw client") } },
      }),
      headers,
    );
    const stream = sseMessages(call);
    await waitFor(() => stream.messages.some((message) => message.method === "elicitation/create"), {
      what: "the form on the call's own stream",
    });
    const form = stream.messages.find((message) => message.method === "elicitation/create") as Record<
      string,
      any
    >;
    await waitFor(() => page.of("question").length > 0, { what: "the card on the page" });
    const viewer = parseViewerLine(server.stderr) as ViewerAddress;
    const answered = await fetch(`${viewer.origin}/answer`, {
      method: "POST",
      headers: { "content-type": "application/json", origin: viewer.origin, cookie: viewer.cookie },
      body: JSON.stringify({ id: page.of("question")[0]?.question.id, decision: "allow_once" }),
    });
    expect(answered.status).toBe(200);
    await stream.done;
    const withdrawn = stream.messages.findIndex(
      (message) => message.method === "notifications/cancelled" && message.params.requestId === form.id,
    );
    const result = stream.messages.findIndex((message) => message.id === 2);
    expect(withdrawn).toBeGreaterThan(-1);
    expect(withdrawn).toBeLessThan(result);
    expect(stream.messages[result]?.result.structuredContent.value).toBe("sent");
    expect(calls.tools().length).toBe(before + 1);
  } finally {
    await page.close();
  }
}, 60_000);
