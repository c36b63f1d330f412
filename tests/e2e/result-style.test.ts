// The result-style table (src/server/styles/table.ts) as the binary applies it: a generic client gets the
// contract's outputSchema and structuredContent; a client of the table, or any client under
// --result-style text / REPL_MCP_RESULT_STYLE=text, gets tools without outputSchema and results written for
// a model; the flag wins over the table. What each real client shows its model is in agent-*.test.ts.
// Also: a legacy revision that has no tasks is not told of them.
import { afterEach, describe, expect, test } from "bun:test";
import { BINARY } from "../support/harness.ts";
import { envelope, RawServer } from "../support/raw.ts";

const servers: RawServer[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) await server.close();
});

async function open(
  client: string,
  options: { version?: string; args?: string[]; env?: Record<string, string> } = {},
) {
  const server = await RawServer.start({ era: "none", args: options.args, env: options.env });
  servers.push(server);
  const reply = await server.request("initialize", {
    protocolVersion: options.version ?? "2025-06-18",
    capabilities: {},
    clientInfo: { name: client, version: "1.0.0" },
  });
  server.send({ jsonrpc: "2.0", method: "notifications/initialized" });
  return { server, initialized: reply.result };
}

async function tools(server: RawServer) {
  return (await server.request("tools/list", {})).result.tools as Record<string, unknown>[];
}

describe("the table and its overrides", () => {
  test("a generic client gets outputSchema and structuredContent beside the contract's text", async () => {
    const { server } = await open("some-generic-client");
    expect((await tools(server)).every((tool) => "outputSchema" in tool)).toBe(true);
    const result = (await server.call("execute_python", { code: "x = 21*2; x" })).result;
    expect(result.structuredContent.value).toBe(42);
    expect(result.content[0].text).toBe("\n42");
  });

  for (const client of ["claude-code", "codex-mcp-client", "gemini-cli-mcp-client"]) {
    test(`${client} gets the text style: no outputSchema, no structuredContent`, async () => {
      const { server } = await open(client);
      const listed = await tools(server);
      expect(listed.length).toBeGreaterThan(10);
      expect(listed.filter((tool) => "outputSchema" in tool)).toEqual([]);
      const result = (await server.call("execute_python", { code: "x = 21*2; x" })).result;
      expect(result.structuredContent).toBeUndefined();
      expect(result.content).toEqual([{ type: "text", text: "Out: 42" }]);
      expect(result.isError).toBe(false);
    });
  }

  test("--result-style structured wins over the table", async () => {
    const { server } = await open("claude-code", { args: ["--result-style", "structured"] });
    expect((await tools(server)).every((tool) => "outputSchema" in tool)).toBe(true);
    const result = (await server.call("execute_python", { code: "1/0" })).result;
    expect(result.structuredContent.error_code).toBe("PYTHON_EXCEPTION");
  });

  test("REPL_MCP_RESULT_STYLE=text gives any client the text style, failures flagged with their code", async () => {
    const { server } = await open("some-generic-client", { env: { REPL_MCP_RESULT_STYLE: "text" } });
    const result = (await server.call("execute_python", { code: "print('first')\n1/0" })).result;
    expect(result.structuredContent).toBeUndefined();
    expect(result.isError).toBe(true);
    const text = result.content[0].text as string;
    expect(text.startsWith("first\nError (PYTHON_EXCEPTION): ZeroDivisionError: division by zero\n")).toBe(
      true,
    );
    expect(text).toContain("Traceback (most recent call last):");
  });

  test("an unknown style is a usage error that names the choices", () => {
    const run = Bun.spawnSync([BINARY, "--result-style", "pretty"], { stderr: "pipe", stdin: "ignore" });
    expect(run.exitCode).toBe(2);
    expect(run.stderr.toString()).toContain("--result-style must be one of auto, structured, text");
  });

  test("under 2026-07-28 the style follows each request's clientInfo", async () => {
    const server = await RawServer.start({ era: "modern" });
    servers.push(server);
    const health = (await server.call("python_health", {})).result.structuredContent;
    const session_id = health.server.session_id;
    const generic = (await server.call("execute_python", { code: "6*7", session_id })).result;
    expect(generic.structuredContent.value).toBe(42);
    const meta = {
      ...envelope(),
      "io.modelcontextprotocol/clientInfo": { name: "claude-code", version: "2" },
    };
    const listed = await server.request("tools/list", { _meta: meta });
    expect(listed.result.tools.filter((tool: object) => "outputSchema" in tool)).toEqual([]);
    const text = await server.request("tools/call", {
      name: "execute_python",
      arguments: { code: "6*7", session_id },
      _meta: meta,
    });
    expect(text.result.structuredContent).toBeUndefined();
    expect(text.result.content[0].text).toBe("Out: 42");
  });
});

describe("honest capabilities", () => {
  test("2025-06-18 is told of no tasks, and no tool offers taskSupport", async () => {
    const { server, initialized } = await open("some-generic-client", { version: "2025-06-18" });
    expect(initialized.protocolVersion).toBe("2025-06-18");
    expect(initialized.capabilities.tasks).toBeUndefined();
    expect(initialized.capabilities.tools).toBeDefined();
    expect((await tools(server)).filter((tool) => "execution" in tool)).toEqual([]);
  });

  test("2025-11-25 is told of tasks, and the execution tools offer them", async () => {
    const { server, initialized } = await open("some-generic-client", { version: "2025-11-25" });
    expect(initialized.capabilities.tasks).toBeDefined();
    const offering = (await tools(server)).filter((tool) => "execution" in tool).map((tool) => tool.name);
    expect(offering).toContain("execute_python");
    expect(offering).toContain("python_execute_file");
  });
});
