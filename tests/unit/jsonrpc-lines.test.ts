// The one JSON-RPC line reader shared by our stdin and stdio MCP peers.
import { expect, test } from "bun:test";
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
