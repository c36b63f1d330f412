// The test clients in both protocol eras, over stdio and HTTP: the harness's `era` option really gives a
// 2026-07-28 client (no initialize, no transport session) or a 2025-11-25 one, cells run in either, and
// a 2026 client that names no session is refused before anything runs.
import { afterEach, describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { ProtocolError } from "@modelcontextprotocol/client";
import { type Era, Harness, MODERN_VERSION, type ToolClient } from "../support/harness.ts";
import { HttpServer } from "../support/http.ts";
import { RawServer } from "../support/raw.ts";

const NO_SESSION = "Pass session_id from python_health or python_session_open to reference persistent state";

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

interface Connected {
  client: ToolClient;
  /** Where a cell may write files the test then looks for. */
  dir: string;
  /** The transport's session id (HTTP only; undefined on stdio and in the stateless era). */
  transportSession?: string;
}

const transports: Record<string, (era: Era) => Promise<Connected>> = {
  stdio: async (era) => {
    const h = await Harness.start({ era });
    cleanups.push(() => h.close());
    return { client: h, dir: h.dir };
  },
  http: async (era) => {
    const server = await HttpServer.start();
    cleanups.push(() => server.stop());
    const client = await server.connect(server.auth, { era });
    return { client, dir: server.dir, transportSession: client.transport.sessionId };
  },
};

/** The JSON-RPC error a rejected call carries, or "resolved". */
async function refusal(call: Promise<unknown>) {
  return await call.then(
    () => "resolved",
    (error) =>
      error instanceof ProtocolError ? { code: error.code, message: error.message } : String(error),
  );
}

for (const [name, connect] of Object.entries(transports)) {
  describe(`${name}`, () => {
    test("modern: 2026-07-28 without a transport session; cells keep state in the named session", async () => {
      const { client, transportSession } = await connect("modern");
      expect(client.client.getNegotiatedProtocolVersion()).toBe(MODERN_VERSION);
      expect(transportSession).toBeUndefined();
      expect(await client.sessionId()).toBeString();
      expect((await client.run("x = 41")).success).toBe(true);
      const cell = await client.run("x + 1");
      expect([cell.success, cell.value, cell.session_id]).toEqual([true, 42, await client.sessionId()]);
    });

    test("modern: execute_python and python_start without session_id are refused and run nothing", async () => {
      const { client, dir } = await connect("modern");
      const marker = join(dir, "ran");
      const code = `open(${JSON.stringify(marker)}, 'w').write('ran')`;
      for (const tool of ["execute_python", "python_start"]) {
        expect([tool, await refusal(client.call(tool, { code }))]).toEqual([
          tool,
          { code: -32602, message: NO_SESSION },
        ]);
      }
      // The same cell with the session named does run, so the refusal above was about the session only.
      expect(existsSync(marker)).toBe(false);
      expect((await client.run(code)).success).toBe(true);
      expect(existsSync(marker)).toBe(true);
    });

    test("legacy (the default): 2025-11-25, and the default session needs no id", async () => {
      const { client, transportSession } = await connect("legacy");
      expect(client.client.getNegotiatedProtocolVersion()).toBe("2025-11-25");
      if (name === "http") expect(transportSession).toBeString();
      const cell = (await client.call("execute_python", { code: "6 * 7" })).structuredContent;
      expect([cell.success, cell.value, cell.session_id]).toEqual([true, 42, await client.sessionId()]);
    });
  });
}

// Each legacy revision a client may open with gets that revision back and a working session of cells,
// over stdio and over HTTP, from the same binary that serves 2026-07-28.
describe("every legacy revision", () => {
  for (const version of ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]) {
    test(`${version} over stdio and HTTP: initialize answers it, cells keep their state`, async () => {
      const raw = await RawServer.start({ era: "none" });
      cleanups.push(() => raw.close());
      const opened = await raw.request("initialize", {
        protocolVersion: version,
        capabilities: {},
        clientInfo: { name: "legacy", version: "0" },
      });
      expect(opened.result.protocolVersion).toBe(version);
      raw.send({ jsonrpc: "2.0", method: "notifications/initialized" });
      expect((await raw.run("n = 20")).success).toBe(true);
      expect((await raw.run("n + 1")).value).toBe(21);

      const server = await HttpServer.start();
      cleanups.push(() => server.stop());
      const init = await server.post(
        JSON.stringify({
          jsonrpc: "2.0",
          id: 1,
          method: "initialize",
          params: {
            protocolVersion: version,
            capabilities: {},
            clientInfo: { name: "legacy", version: "0" },
          },
        }),
      );
      const session = init.headers.get("mcp-session-id") as string;
      expect(session).toBeTruthy();
      const events = await init.text();
      expect(events).toContain(`"protocolVersion":"${version}"`);
      const headers = { "mcp-session-id": session, "mcp-protocol-version": version };
      await server.post(JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }), headers);
      const cell = (id: number, code: string) =>
        server
          .post(
            JSON.stringify({
              jsonrpc: "2.0",
              id,
              method: "tools/call",
              params: { name: "execute_python", arguments: { code } },
            }),
            headers,
          )
          .then((response) => response.text());
      expect(await cell(2, "m = 41")).toContain('"success":true');
      expect(await cell(3, "m + 1")).toContain('"value":42');
    });
  }
});
