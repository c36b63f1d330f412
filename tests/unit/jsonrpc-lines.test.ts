// The one JSON-RPC line reader shared by our stdin and stdio MCP peers.
import { expect, test } from "bun:test";
import { JSONRPCMessageSchema } from "@modelcontextprotocol/core";
import { isBlankLine, parseJsonRpcLine } from "../../src/wire/jsonrpc.ts";

const bytes = (text: string) => new TextEncoder().encode(text);

test("a JSON-RPC message is parsed; anything else names its JSON-RPC error", () => {
  expect(parseJsonRpcLine(bytes('{"jsonrpc":"2.0","id":1,"method":"ping"}'))).toEqual({
    message: { jsonrpc: "2.0", id: 1, method: "ping" },
  });
  expect(parseJsonRpcLine(new Uint8Array([0xff, 0xfe]))).toMatchObject({ code: -32700 });
  expect(parseJsonRpcLine(bytes("{not json"))).toMatchObject({ code: -32700 });
  expect(parseJsonRpcLine(bytes('{"hello":1}'))).toMatchObject({ code: -32600 });
});

test("empty lines and a lone CR are blank; anything else is not", () => {
  expect(isBlankLine(bytes(""))).toBe(true);
  expect(isBlankLine(bytes("\r"))).toBe(true);
  expect(isBlankLine(bytes(" "))).toBe(false);
});

test("every message is read exactly as the SDK's schema reads it, the common shapes included", () => {
  const ids = [1, 0, -3, "a", "", 1.5, 2 ** 60, null, true, {}, undefined];
  const params = [
    undefined,
    {},
    { name: "x", arguments: { a: [1] } },
    { _meta: { progressToken: 1 } },
    [],
    null,
    3,
  ];
  const results = [
    {},
    { content: [] },
    { _meta: {} },
    { _meta: { "io.modelcontextprotocol/serverInfo": 5 } },
    [],
    null,
  ];
  const base: Record<string, unknown>[] = [];
  for (const id of ids) {
    for (const p of params) {
      base.push({ jsonrpc: "2.0", id, method: "tools/call", params: p });
      base.push({ jsonrpc: "2.0", method: "notifications/x", params: p });
    }
    for (const result of results) base.push({ jsonrpc: "2.0", id, result });
    base.push({ jsonrpc: "2.0", id, error: { code: -32000, message: "m", extra: 1 } });
  }
  const values: unknown[] = [];
  for (const message of base) {
    const clean = Object.fromEntries(Object.entries(message).filter(([, v]) => v !== undefined));
    values.push(clean, { ...clean, extra: 1 }, { ...clean, jsonrpc: "1.0" }, { ...clean, method: 7 });
    const { jsonrpc: _, ...withoutVersion } = clean;
    values.push(withoutVersion);
  }
  values.push([], null, "x", 5, JSON.parse('{"jsonrpc":"2.0","id":1,"method":"m","__proto__":{"a":1}}'));
  let common = 0;
  for (const value of values) {
    const text = JSON.stringify(value);
    const ours = parseJsonRpcLine(bytes(text));
    const sdk = JSONRPCMessageSchema.safeParse(JSON.parse(text));
    if (sdk.success) {
      expect(ours).toEqual({ message: sdk.data });
    } else {
      expect(ours).toMatchObject({ code: -32600 });
    }
    if (sdk.success && JSON.stringify(sdk.data) === text) common++;
  }
  // The corpus does reach the shapes read without the schema.
  expect(common).toBeGreaterThan(20);
});
