// What an approval shows the person: the call's server, tool, summary and arguments, bounded, with the
// registry entry's credentials hidden wherever a cell copied them into the arguments; and which tools
// the `approve` field names.
import { expect, test } from "bun:test";
import { approvalQuestion, needsApproval } from "../../src/broker/approval.ts";
import type { ServerEntry } from "../../src/broker/config.ts";
import { APPROVAL_ARGUMENTS_MAX_CHARS } from "../../src/limits.ts";

const http = (approve: ServerEntry["approve"]): ServerEntry => ({
  name: "crm",
  scope: "project",
  approve,
  transport: {
    type: "http",
    url: "https://crm.example/mcp",
    headers: { authorization: "Bearer tok-123456789", "x-flag": "1" },
    oauth: { clientSecret: 'se"cret-value' },
  },
});

const tool = (name: string, extra: Record<string, unknown> = {}) =>
  ({ name, inputSchema: { type: "object" }, ...extra }) as Parameters<typeof needsApproval>[1];

test("credentials of the entry never appear in the arguments shown; short values are left alone", () => {
  const question = approvalQuestion(http("all"), tool("send", { description: "Sends a message.\nMore." }), {
    header: "Bearer tok-123456789",
    quoted: 'se"cret-value',
    flag: "1",
  });
  expect(question.arguments).not.toContain("tok-123456789");
  expect(question.arguments).not.toContain("cret-value");
  expect(question.arguments).toContain("‹hidden›");
  expect(question.arguments).toContain('"flag":"1"');
  expect(question.summary).toBe("Sends a message.");
  expect([question.server, question.tool]).toEqual(["crm", "send"]);
});

test("long arguments are cut and say how long they were", () => {
  const question = approvalQuestion(http("all"), tool("send"), { body: "x".repeat(10_000) });
  expect(question.arguments.length).toBeLessThan(APPROVAL_ARGUMENTS_MAX_CHARS + 60);
  expect(question.arguments).toContain("characters in all");
});

test("writes, all and globs name the tools that need approval", () => {
  const readOnly = tool("search", { annotations: { readOnlyHint: true } });
  expect(needsApproval(http("writes"), readOnly)).toBe(false);
  expect(needsApproval(http("writes"), tool("create"))).toBe(true);
  expect(needsApproval(http("all"), readOnly)).toBe(true);
  expect(needsApproval(http(["delete_*", "send_?"]), tool("delete_row"))).toBe(true);
  expect(needsApproval(http(["delete_*", "send_?"]), tool("send_x"))).toBe(true);
  expect(needsApproval(http(["delete_*", "send_?"]), tool("send_xy"))).toBe(false);
  expect(needsApproval(http(["a.b"]), tool("aXb"))).toBe(false);
  expect(needsApproval(http(undefined), tool("delete_row"))).toBe(false);
});
