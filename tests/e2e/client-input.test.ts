// What the server does with input from its MCP client that is broken at the line or JSON-RPC level
// (contract §1.0 override) or whose tools/call arguments are not an object (§1.1).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { RawServer } from "../support/raw.ts";

let s: RawServer;
/** Each group gets its own server, so that one defect coming back cannot hide the other. */
function ownServer() {
  beforeAll(async () => {
    s = await RawServer.start();
  });
  afterAll(async () => {
    await s.close();
  });
}

/** Errors with id null received so far. */
const nullIdErrors = () => s.messages.filter((message) => message.id === null && message.error);

/** Writes one bad line and returns the error it was answered with. */
async function refusal(line: string | Uint8Array) {
  const before = nullIdErrors().length;
  s.write(line);
  await s.waitMessage(() => nullIdErrors().length > before, 30_000);
  return nullIdErrors()[before]?.error as { code: number; message: string };
}

describe("defect 12: bad input lines are discarded and answered, and the server keeps serving", () => {
  ownServer();
  test("over-long, non-UTF-8, non-JSON and non-JSON-RPC lines each get an id-null error", async () => {
    const cell = await s.run("kept = 41\nimport os\nos.getpid()");
    const pid = cell.value;
    const generation = cell.generation;
    const marker = join(s.project, "ran.txt");
    const effect = `open(${JSON.stringify(marker)}, 'w').write('x')`;

    // A real request hidden in an over-long line must not run: the line is dropped unread.
    const hidden = JSON.stringify({
      jsonrpc: "2.0",
      id: 7,
      method: "tools/call",
      params: { name: "execute_python", arguments: { code: `${effect}\n#${"p".repeat(1_100_000)}` } },
    });
    const long = await refusal(`${hidden}\n`);
    expect(long.code).toBe(-32600);
    expect(long.message).toContain("1048576");

    // A line with no end in sight is refused when it crosses the limit, before its newline arrives.
    s.write("z".repeat(1_200_000));
    await s.waitMessage(() => nullIdErrors().length === 2, 30_000);
    expect(nullIdErrors()[1]?.error.code).toBe(-32600);
    s.write("still the same line\n");

    const bytes = new Uint8Array([0x7b, 0xff, 0xfe, 0x7d, 0x0a]);
    expect(await refusal(bytes)).toMatchObject({ code: -32700, message: expect.stringContaining("UTF-8") });
    expect(await refusal("this is not json\n")).toMatchObject({
      code: -32700,
      message: expect.stringContaining("JSON"),
    });
    expect(await refusal('{"hello": "world"}\n')).toMatchObject({ code: -32600 });
    expect(await refusal("[1, 2, 3]\n")).toMatchObject({ code: -32600 });
    expect(await refusal('{"jsonrpc":"2.0","id":{},"method":"tools/list"}\n')).toMatchObject({
      code: -32600,
    });

    // Nothing ran, and the session kept its worker and its variables.
    expect(s.messages.some((message) => message.id === 7)).toBe(false);
    expect(existsSync(marker)).toBe(false);
    const after = await s.run("import os\n[kept + 1, os.getpid()]");
    expect(after.value).toEqual([42, pid]);
    expect(after.generation).toBe(generation);
    expect(s.alive).toBe(true);
    expect(s.corrupt).toEqual([]);
  }, 60_000);

  test("a bad line between two halves of the stream does not disturb the requests around it", async () => {
    const id = 9_001;
    s.write(
      `not json\n${JSON.stringify({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "python_health", arguments: {} } })}\n`,
    );
    const reply = await s.waitMessage((message) => message.id === id);
    expect(reply.result.structuredContent.server.session_id).toBeString();
  });
});

describe("defect 11: tools/call arguments that are not an object", () => {
  ownServer();
  test.each([
    ["an array", [1, 2]],
    ["a string", "print(1)"],
    ["a number", 3],
    ["null", null],
  ])("%s is -32602 Invalid arguments at /", async (_label, args) => {
    const reply = await s.call("execute_python", args);
    expect(reply.result).toBeUndefined();
    expect(reply.error).toEqual({ code: -32602, message: "Invalid arguments at /" });
  });

  test("a missing or non-string tool name is -32602, not an internal error", async () => {
    const reply = await s.request("tools/call", { arguments: {} });
    expect(reply.error.code).toBe(-32602);
    expect(reply.error.message).toBe("Unknown tool");
    const numeric = await s.request("tools/call", { name: 5, arguments: {} });
    expect(numeric.error.code).toBe(-32602);
  });

  test("omitted arguments still mean an empty object", async () => {
    const reply = await s.request("tools/call", { name: "python_health" });
    expect(reply.result.isError).toBe(false);
  });
});
