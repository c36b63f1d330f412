// Artifacts through the tools: the store's bounds and ownership, ranges, byte-exact saves, and forwarding
// to a real downstream MCP server, all against the compiled binary.
import { afterAll, afterEach, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/client/validators/ajv";
import { Harness, waitFor } from "../support/harness.ts";

const STDIO_PEER = resolve(import.meta.dir, "../fixtures/peers/stdio-peer.ts");
const UNKNOWN = "Artifact unknown, expired, evicted or belongs to another session";
const MiB = 1024 * 1024;

let h: Harness | undefined;
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  await h?.close();
  h = undefined;
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

/** A server of the test's own, for the tests about the whole store (its descriptors, bounds, I/O jobs). */
async function start() {
  h = await Harness.start();
  const sid: string = (await h.health()).server.session_id;
  return { harness: h, sid };
}

const peer = (env: Record<string, string> = {}, extra: Record<string, unknown> = {}) => ({
  command: process.execPath,
  args: [STDIO_PEER],
  env,
  ...extra,
});

// The tests that neither count the whole store nor fill it share one server, each in a session of its
// own with a scratch directory of its own: a server and a peer cost more CPU to start than such a test.
// What they check is their session's (its artifacts, its journal records, the peer's log since it began).
// Its registry has every peer they use; only the ones a test calls are started.
const SHARED_LOG = {
  PEER_CALL_LOG: join(tmpdir(), `peer-calls-${crypto.randomUUID()}`),
  PEER_CANCEL_LOG: join(tmpdir(), `peer-cancels-${crypto.randomUUID()}`),
};
let shared: Promise<Harness> | undefined;
afterAll(async () => {
  if (shared) await (await shared).close();
  for (const log of Object.values(SHARED_LOG)) rmSync(log, { force: true });
});

function sharedServer(): Promise<Harness> {
  shared ??= Harness.start({
    beforeStart: (project) =>
      writeFileSync(
        join(project, ".mcp.json"),
        JSON.stringify({
          mcpServers: {
            peer: peer(SHARED_LOG),
            limited: peer({}, { allowedTools: ["receive"] }),
            // A peer that never answers initialize: a forward to it waits in connect, before any dispatch.
            mute: { command: "sleep", args: ["30"] },
          },
        }),
      ),
  });
  return shared;
}

/**
 * The shared server, a scratch directory, and a session of the test's own (or, with `defaultSession`, the
 * server's default session, which no test creates artifacts in).
 */
async function seat({ defaultSession = false } = {}) {
  const harness = await sharedServer();
  const dir = mkdtempSync(join(harness.dir, "test-"));
  if (defaultSession) return { harness, dir, sid: (await harness.health()).server.session_id as string };
  const opened = await harness.call("python_session_open", { name: "test", project: harness.project });
  const sid = opened.structuredContent.session_id as string;
  cleanups.push(() => harness.call("python_session_close", { session_id: sid }));
  return { harness, dir, sid };
}

/** What the shared peer logged (`PEER_CALL_LOG` or `PEER_CANCEL_LOG`) since this was called. */
function logSince(log: keyof typeof SHARED_LOG): () => string {
  const read = () => (existsSync(SHARED_LOG[log]) ? readFileSync(SHARED_LOG[log], "utf8") : "");
  const before = read().length;
  return () => read().slice(before);
}

/** The journal as the client sees it (from the server's default session), of one session's calls. */
const journal = async (harness: Harness, sessionId: string) =>
  (
    await harness.run(
      `[(r['tool'], r['status']) for r in mcp.journal() if r['session_id'] == ${JSON.stringify(sessionId)}]`,
    )
  ).value;

function readlinkSafe(path: string): string {
  try {
    return readlinkSync(path);
  } catch {
    return "";
  }
}

const sha256 = (bytes: Uint8Array | string) => createHash("sha256").update(bytes).digest("hex");

async function create(harness: Harness, sid: string, path: string, format: string) {
  return (await harness.call("artifact_create", { session_id: sid, path, format })).structuredContent;
}

describe("the store", () => {
  test("text artifacts: reference, ranges, multi-byte splits, saves with and without overwrite", async () => {
    const { harness, sid } = await start();
    const text = `${"Ж".repeat(10)}end`;
    writeFileSync(join(harness.project, "in.txt"), text);
    const ref = await create(harness, sid, "in.txt", "text");
    expect(ref).toMatchObject({
      size: 23,
      format: "text",
      sha256: sha256(text),
      lifetime: "server",
      eviction: "oldest-first",
      session_id: sid,
    });
    // The content lives only behind the server's descriptor: a private file already unlinked.
    const held = readdirSync(`/proc/${harness.serverPid}/fd`)
      .map((fd) => [fd, readlinkSafe(`/proc/${harness.serverPid}/fd/${fd}`)] as const)
      .filter(([, target]) => target.includes(".repl-mcp-artifact-"));
    expect(held).toHaveLength(1);
    const [fd, target] = held[0] as readonly [string, string];
    expect(target.endsWith(" (deleted)")).toBe(true);
    expect(existsSync(target.replace(/ \(deleted\)$/, ""))).toBe(false);
    expect(statSync(`/proc/${harness.serverPid}/fd/${fd}`).mode & 0o777).toBe(0o600);
    const read = async (args: Record<string, unknown>) =>
      (await harness.call("artifact_read", { session_id: sid, id: ref.id, ...args })).structuredContent;
    expect(await read({})).toMatchObject({ content: text, offset: 0, length: 23, has_more: false });
    expect(await read({ offset: 2, length: 4 })).toMatchObject({ content: "ЖЖ", has_more: true });
    // One byte into a two-byte character: text refuses, hex and base64 give the bytes.
    expect((await read({ offset: 1, length: 4 })).error).toBe(
      "Range is not complete UTF-8; adjust boundaries or request hex/base64",
    );
    expect((await read({ offset: 1, length: 4, encoding: "hex" })).content).toBe("96d096d0");
    expect((await read({ offset: 1, length: 4, encoding: "base64" })).content).toBe(
      Buffer.from("96d096d0", "hex").toString("base64"),
    );
    expect(await read({ offset: 23 })).toMatchObject({ content: "", length: 0, has_more: false });
    expect((await read({ offset: 24 })).error).toBe(
      "Artifact range must fit file and length must be <= 65536 bytes",
    );

    const dest = join(harness.project, "saved.txt");
    const saved = await harness.call("artifact_save", { session_id: sid, id: ref.id, path: "saved.txt" });
    expect(saved.structuredContent).toMatchObject({ saved: true, path: dest, artifact: { id: ref.id } });
    expect(sha256(readFileSync(dest))).toBe(ref.sha256);
    expect(statSync(dest).mode & 0o777).toBe(0o600);
    writeFileSync(dest, "changed");
    const refused = await harness.call("artifact_save", { session_id: sid, id: ref.id, path: dest });
    expect(refused.isError).toBe(true);
    expect(refused.structuredContent.error).toBe(
      "Artifact destination exists or cannot be linked; overwrite requires explicit true",
    );
    expect(readFileSync(dest, "utf8")).toBe("changed");
    const over = await harness.call("artifact_save", {
      session_id: sid,
      id: ref.id,
      path: dest,
      overwrite: true,
    });
    expect(over.isError).toBe(false);
    expect(sha256(readFileSync(dest))).toBe(ref.sha256);
    // Nothing of the private temp files stays beside the destination.
    expect(readFileSync(dest, "utf8")).toBe(text);
    const leftovers = readdirSync(harness.project).filter((name) => name.startsWith(".repl"));
    expect(leftovers).toEqual([]);
  });

  test("binary artifacts from a file read back in hex ranges; formats are checked on import", async () => {
    const { harness, sid } = await seat();
    const bytes = Buffer.from(Array.from({ length: 300 }, (_, i) => i % 256));
    writeFileSync(join(harness.project, "blob.bin"), bytes);
    const ref = await create(harness, sid, join(harness.project, "blob.bin"), "binary");
    expect(ref).toMatchObject({ size: 300, format: "binary", sha256: sha256(bytes) });
    const range = await harness.call("artifact_read", {
      session_id: sid,
      id: ref.id,
      offset: 254,
      length: 4,
      encoding: "hex",
    });
    expect(range.structuredContent).toMatchObject({ content: "feff0001", length: 4, has_more: true });
    const asText = await create(harness, sid, "blob.bin", "text");
    expect(asText.error).toBe("Text/JSON artifact must be UTF-8");
    writeFileSync(join(harness.project, "bad.json"), '{"a": [1, 2');
    expect((await create(harness, sid, "bad.json", "json")).error).toBe(
      "Artifact JSON invalid or exceeds parser nesting limit",
    );
    writeFileSync(join(harness.project, "deep.json"), `${"[".repeat(1000)}${"]".repeat(1000)}`);
    expect((await create(harness, sid, "deep.json", "json")).error).toBe(
      "Artifact JSON invalid or exceeds parser nesting limit",
    );
    await expect(
      harness.call("artifact_create", { session_id: sid, path: "blob.bin", format: "csv" }),
    ).rejects.toThrow("Invalid arguments at /format");
  });

  test("oldest-first eviction at 64 entries; failed imports (missing, FIFO, invalid JSON, over 16 MiB) evict nothing", async () => {
    const { harness, sid } = await start();
    writeFileSync(join(harness.project, "small.txt"), "x");
    const ids: string[] = [];
    for (let i = 0; i < 64; i++) ids.push((await create(harness, sid, "small.txt", "text")).id);
    const readable = async (id: string) =>
      !(await harness.call("artifact_read", { session_id: sid, id })).isError;

    const fifo = join(harness.project, "pipe");
    expect(Bun.spawnSync(["mkfifo", fifo]).exitCode).toBe(0);
    writeFileSync(join(harness.project, "bad.json"), "{nope");
    writeFileSync(join(harness.project, "huge.bin"), Buffer.alloc(16 * MiB + 1));
    const failures = [
      ["missing.txt", "binary", "Artifact input cannot be opened"],
      ["pipe", "binary", "Artifact input must be a regular file"],
      ["/dev/null", "binary", "Artifact input must be a regular file"],
      [".", "binary", "Artifact input must be a regular file"],
      ["bad.json", "json", "Artifact JSON invalid or exceeds parser nesting limit"],
      ["huge.bin", "binary", "Artifact exceeds 16 MiB"],
    ];
    for (const [path, format, message] of failures) {
      const result = await harness.call("artifact_create", { session_id: sid, path, format });
      expect([path, result.isError, result.structuredContent.error]).toEqual([path, true, message]);
    }
    for (const id of ids) expect(await readable(id)).toBe(true);

    const newest = (await create(harness, sid, "small.txt", "text")).id;
    expect(await readable(newest)).toBe(true);
    expect(await readable(ids[0] as string)).toBe(false);
    expect(await readable(ids[1] as string)).toBe(true);
  }, 60_000);

  test("oldest-first eviction when the store would exceed 64 MiB", async () => {
    const { harness, sid } = await start();
    writeFileSync(join(harness.project, "max.bin"), Buffer.alloc(16 * MiB, 7));
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) ids.push((await create(harness, sid, "max.bin", "binary")).id);
    const readable = async (id: string) =>
      !(await harness.call("artifact_read", { session_id: sid, id, length: 1 })).isError;
    for (const id of ids) expect(await readable(id)).toBe(true);
    const fifth = await create(harness, sid, "max.bin", "binary");
    expect(fifth.size).toBe(16 * MiB);
    expect(await readable(ids[0] as string)).toBe(false);
    for (const id of [...ids.slice(1), fifth.id]) expect(await readable(id)).toBe(true);
  }, 60_000);

  test("another session can neither read, save, forward nor delete; closing the owner removes them", async () => {
    const { harness, dir, sid } = await seat({ defaultSession: true });
    const other = join(dir, "other");
    mkdirSync(other);
    const opened = (await harness.call("python_session_open", { name: "other", project: other }))
      .structuredContent;
    writeFileSync(join(other, "mine.txt"), "secret");
    const mine = await create(harness, opened.session_id, "mine.txt", "text");
    expect(mine.size).toBe(6);
    for (const [tool, extra] of [
      ["artifact_read", {}],
      ["artifact_save", { path: join(dir, "stolen") }],
      ["artifact_delete", {}],
      ["artifact_forward", { server: "x", tool: "y", argument: "z" }],
    ] as const) {
      const result = await harness.call(tool, { session_id: sid, id: mine.id, ...extra });
      expect([tool, result.structuredContent.error]).toEqual([tool, UNKNOWN]);
    }
    expect(existsSync(join(dir, "stolen"))).toBe(false);
    const own = await harness.call("artifact_read", { session_id: opened.session_id, id: mine.id });
    expect(own.structuredContent.content).toBe("secret");
    await harness.call("python_session_close", { session_id: opened.session_id });
    // The session is gone, so naming it is a protocol error; the default session cannot see it either.
    await expect(
      harness.call("artifact_read", { session_id: opened.session_id, id: mine.id }),
    ).rejects.toThrow("Session not found or closed; open a new session");
    expect(
      (await harness.call("artifact_read", { session_id: sid, id: mine.id })).structuredContent.error,
    ).toBe(UNKNOWN);
  }, 30_000);

  test("whole-content jobs are bounded: a burst of big imports gets clear retry errors, never a queue", async () => {
    const { harness, sid } = await start();
    writeFileSync(join(harness.project, "max.bin"), Buffer.alloc(16 * MiB, 1));
    const results = await Promise.all(
      Array.from({ length: 8 }, () => create(harness, sid, "max.bin", "binary")),
    );
    const refused = results.filter((result) => "error" in result);
    expect(refused.length).toBeGreaterThan(0);
    for (const result of refused) {
      expect(result.error).toBe("Artifact I/O capacity exhausted; retry after active jobs complete");
    }
    expect(results.length - refused.length).toBeGreaterThanOrEqual(4);
    // Once the burst is over, the next import works.
    expect((await create(harness, sid, "max.bin", "binary")).size).toBe(16 * MiB);
  }, 60_000);

  test("output schemas validate real success and error payloads", async () => {
    const { harness, sid } = await seat();
    const listed = await harness.client.listTools();
    const validator = new AjvJsonSchemaValidator();
    const check = (tool: string, value: unknown) => {
      const schema = listed.tools.find((t) => t.name === tool)?.outputSchema;
      const verdict = validator.getValidator(schema as never)(value);
      expect([tool, verdict.valid, verdict.errorMessage]).toEqual([tool, true, undefined]);
    };
    writeFileSync(join(harness.project, "v.json"), '{"a": 1}');
    const results: [string, Record<string, unknown>][] = [];
    const call = async (tool: string, args: Record<string, unknown>) => {
      const result = await harness.call(tool, { session_id: sid, ...args });
      results.push([tool, result.structuredContent]);
      return result.structuredContent;
    };
    const ref = await call("artifact_create", { path: "v.json", format: "json" });
    await call("artifact_create", { path: "nope", format: "json" });
    await call("artifact_read", { id: ref.id });
    await call("artifact_read", { id: "nope" });
    await call("artifact_save", { id: ref.id, path: "saved.json" });
    await call("artifact_save", { id: ref.id, path: "saved.json" });
    await call("artifact_forward", { id: ref.id, server: "peer", tool: "receive", argument: "payload" });
    await call("artifact_forward", { id: ref.id, server: "nobody", tool: "receive", argument: "payload" });
    await call("artifact_delete", { id: ref.id });
    await call("artifact_delete", { id: ref.id });
    for (const [tool, value] of results) check(tool, value);
    // Failures name their code and the session that answered, like every routed tool's.
    for (const [, value] of results.filter(([, value]) => "error" in value)) {
      expect(typeof value.error_code).toBe("string");
      expect(value.session_id).toBe(sid);
    }
    expect(results.filter(([, value]) => "error" in value)).toHaveLength(5);
  }, 30_000);
});

describe("forwarding", () => {
  test("as json, text and base64 under the named argument, with extra arguments kept", async () => {
    const { harness, sid } = await seat();
    writeFileSync(join(harness.project, "v.json"), '{"rows": [1, "two", null]}');
    writeFileSync(join(harness.project, "v.bin"), Buffer.from([0, 1, 254, 255]));
    const json = await create(harness, sid, "v.json", "json");
    const bin = await create(harness, sid, "v.bin", "binary");
    const forward = async (id: string, format: string, extra: Record<string, unknown> = {}) =>
      await harness.call("artifact_forward", {
        session_id: sid,
        id,
        server: "peer",
        tool: "receive",
        argument: "payload",
        format,
        ...extra,
      });
    const asJson = await forward(json.id, "json");
    expect(asJson.isError).toBe(false);
    expect(asJson.structuredContent.structuredContent).toEqual({
      payload: { rows: [1, "two", null] },
      kind: "object",
    });
    expect(asJson.structuredContent.session_id).toBe(sid);
    const asText = await forward(json.id, "text", { arguments: { note: "n", payload: "overridden" } });
    expect(asText.structuredContent.structuredContent).toEqual({
      payload: '{"rows": [1, "two", null]}',
      kind: "string",
    });
    const asBase64 = await forward(bin.id, "base64");
    expect(asBase64.structuredContent.structuredContent.payload).toBe("AAH+/w==");
    expect((await forward(bin.id, "json")).structuredContent.error).toBe(
      "Artifact is not valid bounded JSON",
    );
    expect((await forward(bin.id, "text")).structuredContent.error).toBe("Artifact is not UTF-8 text");
    // The downstream schema still applies: `note` must be a string.
    const schema = await forward(json.id, "json", { arguments: { note: 5 } });
    expect(schema.isError).toBe(true);
    expect(schema.structuredContent.error).toContain("inputSchema");
    expect(await journal(harness, sid)).toEqual([
      ["receive", "completed"],
      ["receive", "completed"],
      ["receive", "completed"],
    ]);
  }, 30_000);

  test("over 512 KiB is refused; allowedTools applies; the argument budget applies", async () => {
    const { harness, sid } = await seat();
    writeFileSync(join(harness.project, "big.txt"), "a".repeat(512 * 1024 + 1));
    writeFileSync(join(harness.project, "mid.txt"), "a".repeat(300 * 1024));
    const big = await create(harness, sid, "big.txt", "text");
    const mid = await create(harness, sid, "mid.txt", "text");
    const forward = (id: string, tool: string) =>
      harness.call("artifact_forward", {
        session_id: sid,
        id,
        server: "limited",
        tool,
        argument: "payload",
        format: "text",
      });
    expect((await forward(big.id, "receive")).structuredContent.error).toBe(
      "Artifact forwarding limit is 512 KiB; save the file or explicitly create a smaller artifact",
    );
    expect((await forward(mid.id, "receive")).structuredContent.error).toContain("256 KiB budget");
    expect((await forward(mid.id, "echo")).structuredContent.error).toContain("allowedTools");
    expect(await journal(harness, sid)).toEqual([]);
  }, 30_000);

  test("a cancelled forward never writes late and is journaled outcome_unknown", async () => {
    const calls = logSince("PEER_CALL_LOG");
    const cancels = logSince("PEER_CANCEL_LOG");
    const { harness, dir, sid } = await seat();
    const marker = join(dir, "written");
    writeFileSync(join(harness.project, "path.txt"), marker);
    const ref = await create(harness, sid, "path.txt", "text");
    const controller = new AbortController();
    const pending = harness.call(
      "artifact_forward",
      {
        session_id: sid,
        id: ref.id,
        server: "peer",
        tool: "slow_write",
        argument: "path",
        format: "text",
        arguments: { seconds: 2 },
      },
      { signal: controller.signal },
    );
    pending.catch(() => {});
    await waitFor(() => calls().includes("slow_write"), {
      timeoutMs: 10_000,
      what: "the forward to reach the peer",
    });
    controller.abort();
    await expect(pending).rejects.toThrow();
    await waitFor(() => cancels().includes("slow_write"), {
      what: "the peer to hear the cancellation",
    });
    await Bun.sleep(2_500);
    expect(existsSync(marker)).toBe(false);
    expect(await journal(harness, sid)).toEqual([["slow_write", "outcome_unknown"]]);
  }, 30_000);

  test("a forward stopped before it was sent says so, and journals nothing", async () => {
    // To the mute peer: the forward waits in connect, before any dispatch.
    const harness = await sharedServer();
    const opened = (await harness.call("python_session_open", { name: "s", project: harness.project }))
      .structuredContent;
    writeFileSync(join(harness.project, "v.json"), "[1]");
    const ref = await create(harness, opened.session_id, "v.json", "json");
    const pending = harness.call("artifact_forward", {
      session_id: opened.session_id,
      id: ref.id,
      server: "mute",
      tool: "anything",
      argument: "payload",
    });
    await Bun.sleep(500);
    await harness.call("python_session_close", { session_id: opened.session_id });
    const result = await pending;
    expect(result.structuredContent.error).toBe("Forwarding cancelled before dispatch");
    expect(await journal(harness, opened.session_id)).toEqual([]);
  }, 30_000);

  test("closing the session during a forward reports it and journals outcome_unknown", async () => {
    const calls = logSince("PEER_CALL_LOG");
    const { harness, dir } = await seat({ defaultSession: true });
    const opened = (await harness.call("python_session_open", { name: "s", project: harness.project }))
      .structuredContent;
    const marker = join(dir, "written");
    writeFileSync(join(harness.project, "path.txt"), marker);
    const ref = await create(harness, opened.session_id, "path.txt", "text");
    const pending = harness.call("artifact_forward", {
      session_id: opened.session_id,
      id: ref.id,
      server: "peer",
      tool: "slow_write",
      argument: "path",
      format: "text",
      arguments: { seconds: 2 },
    });
    await waitFor(() => calls().includes("slow_write"), {
      timeoutMs: 10_000,
      what: "the forward to reach the peer",
    });
    await harness.call("python_session_close", { session_id: opened.session_id });
    const result = await pending;
    expect(result.isError).toBe(true);
    expect(result.structuredContent.error).toBe(
      "Session closed; forwarding cancelled; external effects may already have occurred",
    );
    await Bun.sleep(2_500);
    expect(existsSync(marker)).toBe(false);
    expect(await journal(harness, opened.session_id)).toEqual([["slow_write", "outcome_unknown"]]);
  }, 30_000);
});
