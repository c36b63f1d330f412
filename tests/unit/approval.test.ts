// What an approval shows the person: the call's server, tool, summary and arguments, bounded, with the
// registry entry's credentials hidden wherever a cell copied them into the arguments; and which tools
// the `approve` field names.
import { expect, test } from "bun:test";
import { approvalQuestion, needsApproval } from "../../src/broker/approval.ts";
import { parseEntry, resolveEntry, type ServerEntry } from "../../src/broker/config.ts";
import { APPROVAL_ARGUMENTS_MAX_CHARS } from "../../src/limits.ts";

/** An entry as the registry resolves it, with these environment variables for its `${NAME}`s. */
const resolved = (raw: Record<string, unknown>, env: Record<string, string> = {}): ServerEntry =>
  resolveEntry(
    "crm",
    parseEntry("crm", raw),
    "project",
    "/",
    env,
    (_base, path) => path,
    () => true,
  );

const http = (approve: ServerEntry["approve"]): ServerEntry =>
  resolved({
    type: "http",
    url: "https://crm.example/mcp",
    headers: { "x-api-key": "key-123456789", "x-flag": "1" },
    oauth: { grantType: "client_credentials", clientId: "crm-client", clientSecret: 'se"cret-value' },
    ...(approve === undefined ? {} : { approve }),
  });

const tool = (name: string, extra: Record<string, unknown> = {}) =>
  ({ name, inputSchema: { type: "object" }, ...extra }) as Parameters<typeof needsApproval>[1];

test("credentials of the entry never appear in the arguments shown; short values are left alone", () => {
  const question = approvalQuestion(http("all"), tool("send", { description: "Sends a message.\nMore." }), {
    header: "key-123456789",
    quoted: 'se"cret-value',
    flag: "1",
  });
  expect(question.arguments).not.toContain("key-123456789");
  expect(question.arguments).not.toContain("cret-value");
  expect(question.arguments).toContain("‹hidden›");
  expect(question.arguments).toContain('"flag":"1"');
  expect(question.summary).toBe("Sends a message.");
  expect([question.server, question.tool]).toEqual(["crm", "send"]);
});

test("a bearer token is hidden without its scheme, and every value taken from the environment but paths", () => {
  const env = {
    TOKEN: "tok-0123456789",
    QUERY_KEY: "query-key-42",
    HOME_DIR: "/home/someone",
  };
  const web = resolved(
    {
      type: "http",
      url: "https://crm.example/mcp?key=${QUERY_KEY}",
      headers: { Authorization: "Bearer ${TOKEN}" },
      approve: "all",
    },
    env,
  );
  const copied = { token: "tok-0123456789", query: "query-key-42", file: "/home/someone/notes.txt" };
  const shown = approvalQuestion(web, tool("send"), copied).arguments;
  expect(shown).toBe('{"token":"‹hidden›","query":"‹hidden›","file":"/home/someone/notes.txt"}');
  // A literal bearer header, without a placeholder, is hidden the same way.
  const literal = resolved({
    type: "http",
    url: "https://crm.example/mcp",
    headers: { Authorization: "Bearer literal-tok-77" },
  });
  expect(approvalQuestion(literal, tool("send"), { t: "literal-tok-77" }).arguments).toBe('{"t":"‹hidden›"}');
  // A stdio peer: env values whole, `${NAME}`s in args; the command and cwd name files, not credentials.
  const local = resolved(
    {
      command: "${HOME_DIR}/bin/peer",
      args: ["--key", "${QUERY_KEY}"],
      env: { API_TOKEN: "${TOKEN}", MODE: "verbose-mode" },
      cwd: "${HOME_DIR}",
    },
    env,
  );
  expect(local.secrets.sort()).toEqual(["query-key-42", "tok-0123456789", "verbose-mode"]);
  expect(approvalQuestion(local, tool("send"), copied).arguments).toBe(
    '{"token":"‹hidden›","query":"‹hidden›","file":"/home/someone/notes.txt"}',
  );
  // The tool's own summary is shown with the same values hidden.
  const summarised = approvalQuestion(local, tool("send", { title: "Sends with tok-0123456789" }), {});
  expect(summarised.summary).toBe("Sends with ‹hidden›");
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
