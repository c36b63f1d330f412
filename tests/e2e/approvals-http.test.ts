// Approvals over Streamable HTTP (--transport http), in both eras, with the SDK's client answering the
// form: under 2025-11-25 the elicitation/create travels on the tool call's own response stream; under
// 2026-07-28 every round is a request of its own (each served by a fresh server instance), so the parked
// call must be found again by the retry. The peer's log says the call went exactly once.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { HttpServer } from "../support/http.ts";
import { createIssueCell, PeerCalls } from "../support/peer-calls.ts";

const calls = new PeerCalls();
let server: HttpServer;
beforeAll(async () => {
  server = await HttpServer.start([], {}, (project) =>
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
