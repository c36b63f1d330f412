// Artifacts from Python: the helpers every cell has, chunked uploads bound to the cell, and
// auto-artifacts for trailing values too large to preview, against the compiled binary and real python3.
import { afterEach, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { Harness, sessionPerTest, type TestSession, waitFor } from "../support/harness.ts";

const STDIO_PEER = resolve(import.meta.dir, "../fixtures/peers/stdio-peer.ts");

// One server for the file; each test runs in a session (a worker and a project) of its own. The
// artifact_forward test starts a server of its own, with the peer in its launch project's .mcp.json.
const h = sessionPerTest();

let own: Harness | undefined;
const cleanups: (() => void)[] = [];
afterEach(async () => {
  await own?.close();
  own = undefined;
  for (const cleanup of cleanups.splice(0)) cleanup();
});

async function startWithPeer(env: Record<string, string>) {
  own = await Harness.start({
    beforeStart: (project) => {
      const peer = { command: process.execPath, args: [STDIO_PEER], env };
      writeFileSync(join(project, ".mcp.json"), JSON.stringify({ mcpServers: { peer } }));
    },
  });
  return own;
}

const sha256 = (bytes: Uint8Array | string) => createHash("sha256").update(bytes).digest("hex");

/** Counts the bridge requests the worker sends, by operation, from the next cell on. */
/** Records the op of every bridge request frame the worker sends from now on, in `__ops`. */
const COUNT_REQUESTS = [
  "import sys",
  "__w = sys.modules['__main__']",
  "__ops = []",
  "__real = __w._BRIDGE._post",
  "def __counting(pending, op, params):",
  "    __ops.append(op)",
  "    return __real(pending, op, params)",
  "__w._BRIDGE._post = __counting",
].join("\n");

/** Reads a whole artifact through artifact_read ranges. */
async function readAll(harness: TestSession, sid: string, id: string, size: number): Promise<Buffer> {
  const parts: Buffer[] = [];
  for (let offset = 0; offset < size; offset += 65_536) {
    const range = await harness.call("artifact_read", { session_id: sid, id, offset, encoding: "base64" });
    expect(range.isError).toBe(false);
    parts.push(Buffer.from(range.structuredContent.content, "base64"));
  }
  return Buffer.concat(parts);
}

describe("auto-artifacts", () => {
  test("a 100,000-character string: text artifact uploaded in 4 chunks, short preview, survives reset", async () => {
    await h.run(COUNT_REQUESTS);
    const response = await h.call("execute_python", { code: "'x' * 100000" });
    const result = response.structuredContent;
    expect(result.success).toBe(true);
    expect(result.value).toBeUndefined();
    expect(result.artifact).toMatchObject({
      size: 100_000,
      format: "text",
      sha256: sha256("x".repeat(100_000)),
    });
    expect(Buffer.byteLength(result.return_value)).toBeLessThanOrEqual(20_000);
    const text = (response.content[0] as { text: string }).text;
    expect(text).toContain(result.artifact.id);
    expect(text).toContain("artifact_read");
    const ops = (await h.run("__ops")).value;
    expect(ops).toEqual(["artifact.begin", ...Array(4).fill("artifact.append"), "artifact.commit"]);

    await h.run("1", { reset: true });
    const whole = await readAll(h, h.id, result.artifact.id, 100_000);
    expect(whole.toString()).toBe("x".repeat(100_000));
  }, 30_000);

  test("a list of 3,000 dicts: json artifact, response under 100 KB, the same value read back", async () => {
    const response = await h.call("execute_python", {
      code: "[{'i': i, 'name': 'row %d' % i, 'ok': i % 2 == 0} for i in range(3000)]",
    });
    expect(Buffer.byteLength(JSON.stringify(response))).toBeLessThan(100_000);
    const result = response.structuredContent;
    expect(result.return_value).toBe("<list; safe preview omitted; length=3000>");
    expect(result.artifact.format).toBe("json");
    await h.run("1", { reset: true });
    const whole = await readAll(h, h.id, result.artifact.id, result.artifact.size);
    expect(sha256(whole)).toBe(result.artifact.sha256);
    const rows = JSON.parse(whole.toString());
    expect(rows).toHaveLength(3000);
    expect(rows[2999]).toEqual({ i: 2999, name: "row 2999", ok: false });
  }, 30_000);

  test("'Ж' * 100000: 200,000 bytes with the right sha256; a split character is an error, hex is not", async () => {
    const result = await h.run("'Ж' * 100000");
    expect(result.artifact).toMatchObject({
      size: 200_000,
      format: "text",
      sha256: sha256("Ж".repeat(100_000)),
    });
    await h.run("1", { reset: true });
    const read = async (args: Record<string, unknown>) =>
      (await h.call("artifact_read", { session_id: h.id, id: result.artifact.id, ...args }))
        .structuredContent;
    expect((await read({ offset: 199_996 })).content).toBe("ЖЖ");
    expect((await read({ offset: 1, length: 2 })).error).toBe(
      "Range is not complete UTF-8; adjust boundaries or request hex/base64",
    );
    expect((await read({ offset: 1, length: 2, encoding: "hex" })).content).toBe("96d0");
    expect((await read({ offset: 1, length: 2, encoding: "base64" })).content).toBe("ltA=");
  }, 30_000);

  test("bytes and long mcp results become artifacts; custom objects and short values do not", async () => {
    const bytes = await h.run("bytes(range(256)) * 200");
    expect(bytes.artifact).toMatchObject({ format: "binary", size: 51_200 });
    // An mcp.call result (the bridge's envelope type) whose text is too long to preview.
    const envelope = await h.run(
      "import sys\nsys.modules['__main__']._Envelope(content=[{'type': 'text', 'text': 'y' * 3000}])",
    );
    expect(envelope.artifact.format).toBe("json");
    const stored = await h.run(`artifact_read(${JSON.stringify(envelope.artifact.id)})['content']`);
    expect(JSON.parse(stored.value)).toEqual({ content: [{ type: "text", text: "y".repeat(3000) }] });
    const short = await h.run("'x' * 10");
    expect(short.value).toBe("xxxxxxxxxx");
    expect(short.artifact).toBeUndefined();
    const custom = await h.run("class Big:\n    def __len__(self): return 10**6\nBig()");
    expect(custom.artifact).toBeUndefined();
    expect(custom.artifact_error).toBeUndefined();
  }, 30_000);

  test("a value that cannot be stored reports artifact_error and the cell still succeeds", async () => {
    const result = await h.run("'\\ud800' * 30000");
    expect(result.success).toBe(true);
    expect(result.artifact).toBeUndefined();
    expect(result.artifact_error).toContain("lone surrogate");
    const deep = await h.run("x = []\nfor _ in range(200):\n    x = [x]\n[x] * 200");
    expect(deep.success).toBe(true);
    expect(deep.artifact_error).toContain("exact JSON");
  }, 30_000);
});

describe("helpers in cells", () => {
  test("artifact(), artifact_read, artifact_save, artifact_delete round trip", async () => {
    const dest = join(h.dir, "saved.bin");
    const out = await h.run(
      [
        "b = artifact(b'\\x00\\x01binary')",
        "t = artifact('héllo')",
        "j = artifact({'a': [1, 2.5, None, True], 'b': ('x',)})",
        `artifact_save(b, ${JSON.stringify(dest)})`,
        `f = artifact(path=${JSON.stringify(dest)})`,
        "out = {",
        "  'formats': [b['format'], t['format'], j['format'], f['format']],",
        "  'text': artifact_read(t)['content'],",
        "  'json': artifact_read(j['id'])['content'],",
        "  'hex': artifact_read(f, offset=1, length=3, encoding='hex')['content'],",
        "  'same': f['sha256'] == b['sha256'],",
        "  'deleted': artifact_delete(t),",
        "}",
        "try:\n    artifact_read(t)\nexcept Exception as e:\n    out['after_delete'] = str(e)",
        "out",
      ].join("\n"),
    );
    expect(out.success).toBe(true);
    expect(out.value).toMatchObject({
      formats: ["binary", "text", "json", "binary"],
      text: "héllo",
      json: '{"a":[1,2.5,null,true],"b":["x"]}',
      hex: "016269",
      same: true,
      after_delete: "Artifact unknown, expired, evicted or belongs to another session",
    });
    expect(readFileSync(dest).subarray(0, 2)).toEqual(Buffer.from([0, 1]));
  }, 30_000);

  test("artifact() refuses a custom object without calling its repr and without any request", async () => {
    await h.run(COUNT_REQUESTS);
    const out = await h.run(
      [
        "calls = []",
        "class Sneaky:",
        "    def __repr__(self):",
        "        calls.append('repr')",
        "        return 'sneaky'",
        "    __str__ = __repr__",
        "errors = []",
        "for value in [Sneaky(), [1, Sneaky()], {'k': Sneaky()}, {1: 'int key'}, float('nan')]:",
        "    try:",
        "        artifact(value)",
        "    except ValueError as e:",
        "        errors.append(str(e))",
        "{'calls': calls, 'ops': __ops, 'errors': len(errors), 'exact': all('exact JSON' in e for e in errors)}",
      ].join("\n"),
    );
    expect(out.value).toEqual({ calls: [], ops: [], errors: 5, exact: true });
  }, 30_000);

  test("helpers can be shadowed for one cell only; uploads left unfinished are dropped when the cell ends", async () => {
    expect((await h.run("artifact = 5\nartifact")).value).toBe(5);
    expect((await h.run("callable(artifact)")).value).toBe(true);
    const begin =
      "import sys\n[sys.modules['__main__']._BRIDGE.request('artifact.begin', {'format': 'text'}, 5) for _ in range(4)]";
    expect((await h.run(begin)).success).toBe(true);
    // Those four were aborted when the cell ended, so four more fit; a fifth does not.
    const again = await h.run(
      `${begin}\nsys.modules['__main__']._BRIDGE.request('artifact.begin', {'format': 'text'}, 5)`,
    );
    expect(again.error).toContain("Artifact upload capacity exhausted");
    expect((await h.run("artifact('fits again')['size']")).value).toBe(10);
  }, 30_000);

  test("an upload that fails part-way is aborted before the error reaches the cell", async () => {
    const out = await h.run(
      [
        "import sys",
        "w = sys.modules['__main__']",
        "real = w._BRIDGE._post",
        "ops = []",
        "def flaky(pending, op, params):",
        "    ops.append(op)",
        "    if op == 'artifact.append' and params['offset'] > 0:",
        "        raise OSError('link dropped')",
        "    return real(pending, op, params)",
        "w._BRIDGE._post = flaky",
        "try:",
        "    artifact(b'x' * 100000)",
        "except OSError as e:",
        "    error = str(e)",
        "finally:",
        "    w._BRIDGE._post = real",
        "# The aborted upload no longer takes a slot: four new ones fit.",
        "request = w._BRIDGE.request",
        "slots = [request('artifact.begin', {'format': 'binary'}, 5)['chunk_bytes'] for _ in range(4)]",
        "[error, ops, slots]",
      ].join("\n"),
    );
    expect(out.value).toEqual([
      "link dropped",
      ["artifact.begin", "artifact.append", "artifact.append", "artifact.abort"],
      [32_768, 32_768, 32_768, 32_768],
    ]);
  }, 30_000);

  test("artifact_forward from a cell goes through the broker; a tool error raises ToolError", async () => {
    const calls = join(tmpdir(), `peer-calls-${crypto.randomUUID()}`);
    cleanups.push(() => rmSync(calls, { force: true }));
    const harness = await startWithPeer({ PEER_CALL_LOG: calls });
    const forwarded = await harness.run(
      "ref = artifact([1, {'two': 2}])\nartifact_forward(ref, 'peer', 'receive', 'payload')['structuredContent']",
    );
    expect(forwarded.value).toEqual({ payload: [1, { two: 2 }], kind: "array" });
    const failed = await harness.run(
      "try:\n    artifact_forward(ref, 'peer', 'receive', 'payload', arguments={'note': 1})\nexcept Exception as e:\n    r = [type(e).__name__, str(e)]\nr",
    );
    expect(failed.value[0]).toBe("ToolError");
    expect(failed.value[1]).toContain("inputSchema");

    // A cancelled cell's forward never lands, and its journal record says outcome_unknown.
    const marker = join(harness.dir, "written");
    const started = (
      await harness.call("python_start", {
        code: `p = artifact(${JSON.stringify(marker)})\nartifact_forward(p, 'peer', 'slow_write', 'path', format='text', arguments={'seconds': 2})`,
      })
    ).structuredContent;
    await waitFor(() => existsSync(calls) && readFileSync(calls, "utf8").includes("slow_write"), {
      timeoutMs: 10_000,
      what: "the forward to reach the peer",
    });
    await harness.call("python_cancel", { run_id: started.run_id });
    await waitFor(
      async () =>
        "success" in (await harness.call("python_run", { run_id: started.run_id })).structuredContent,
      { what: "the cancelled run to end" },
    );
    await Bun.sleep(2_500);
    expect(existsSync(marker)).toBe(false);
    const journal = await harness.run("[(r['tool'], r['status']) for r in mcp.journal()]");
    expect(journal.value).toEqual([
      ["receive", "completed"],
      ["slow_write", "outcome_unknown"],
    ]);
  }, 40_000);
});
