// Tools as code: mcp.<server>.<tool>(...) end to end, against the typed fixture peer over stdio and over
// Streamable HTTP, and against server-memory from npm. Calls, signatures, help, dir, stubs, argument
// checks before dispatch, return values, McpToolError, cancellation and refresh.
import { afterAll, afterEach, describe, expect, test } from "bun:test";
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { TYPED_TOOLS } from "../fixtures/peers/typed-tools.ts";
import { Harness, cellValue as value, waitFor } from "../support/harness.ts";

const TYPED_PEER = resolve(import.meta.dir, "../fixtures/peers/typed-peer.ts");
const MEMORY_SERVER = resolve(
  import.meta.dir,
  "../../node_modules/@modelcontextprotocol/server-memory/dist/index.js",
);
/** Every fixture tool but one: the registry does not grant delete_everything. */
const GRANTED = TYPED_TOOLS.map((tool) => tool.name).filter((name) => name !== "delete_everything");

let h: Harness | undefined;
const cleanups: (() => void | Promise<void>)[] = [];
afterEach(async () => {
  await h?.close();
  h = undefined;
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

/** What the shared servers (see `sharedTyped`) leave to the end of the file. */
const lastCleanups: (() => void | Promise<void>)[] = [];
afterAll(async () => {
  for (const cleanup of lastCleanups.splice(0).reverse()) await cleanup();
});

function tempFile(name: string, until = cleanups): string {
  const path = join(tmpdir(), `${name}-${crypto.randomUUID()}`);
  until.push(() => rmSync(path, { force: true }));
  return path;
}

const lines = (path: string): Record<string, unknown>[] =>
  existsSync(path)
    ? readFileSync(path, "utf8")
        .split("\n")
        .filter(Boolean)
        .map((line) => JSON.parse(line))
    : [];

function startServer(servers: Record<string, unknown>) {
  return Harness.start({
    beforeStart: (project) => {
      writeFileSync(join(project, ".mcp.json"), JSON.stringify({ mcpServers: servers }));
    },
  });
}

async function start(servers: Record<string, unknown>) {
  h = await startServer(servers);
  return h;
}

/** A cell's printed JSON (for values too large for a preview), failing the test if the cell failed. */
async function printed(harness: Harness, code: string) {
  const result = await harness.run(code);
  if (!result.success) throw new Error(`cell failed: ${result.error}\n${result.stderr}`);
  return JSON.parse(result.stdout);
}

/** [exception class name, message] of a Python expression (the cell itself must succeed). */
async function raised(harness: Harness, expression: string) {
  return value(
    harness,
    `try:\n    ${expression}\n    out = None\nexcept Exception as e:\n    out = [type(e).__name__, str(e)]\nout`,
  );
}

type Transport = "stdio" | "http";

interface TypedServer {
  harness: Harness;
  callLog: string;
  cancelLog: string;
}

/**
 * A server whose registry names the typed peer "typed" and "my-typed", over one transport; its call and
 * cancel logs. `until` is where the logs' and the HTTP peer's cleanup goes.
 */
async function typedRegistry(transport: Transport, until = cleanups) {
  const callLog = tempFile("typed-calls", until);
  const cancelLog = tempFile("typed-cancels", until);
  const env = { PEER_CALL_LOG: callLog, PEER_CANCEL_LOG: cancelLog };
  let entry: Record<string, unknown>;
  if (transport === "stdio") {
    entry = { command: process.execPath, args: [TYPED_PEER, "stdio"], env };
  } else {
    const http = await launchTypedHttpPeer(env);
    until.push(http.stop);
    entry = { type: "http", url: http.url.href };
  }
  const servers = {
    typed: { ...entry, allowedTools: GRANTED },
    "my-typed": { ...entry, allowedTools: ["get-file", "count"] },
  };
  return { servers, callLog, cancelLog };
}

/** The typed peer's registry on a server of the test's own (closed after it). */
async function typedServer(transport: Transport): Promise<TypedServer> {
  const { servers, callLog, cancelLog } = await typedRegistry(transport);
  return { harness: await start(servers), callLog, cancelLog };
}

const shared = new Map<Transport, Promise<TypedServer>>();

/**
 * The typed peer's registry on one server per transport, shared by the tests that need nothing of it
 * fresh: a server, its Python worker and its peer cost more CPU to start than most tests here spend.
 * What a test reads of its state starts with the test: the call and cancel logs are emptied first, and
 * `THIS_TEST` (below) keeps only the journal records made since.
 */
async function sharedTyped(transport: Transport): Promise<TypedServer> {
  let server = shared.get(transport);
  if (!server) {
    server = (async () => {
      const { servers, callLog, cancelLog } = await typedRegistry(transport, lastCleanups);
      const harness = await startServer(servers);
      lastCleanups.push(() => harness.close());
      return { harness, callLog, cancelLog };
    })();
    shared.set(transport, server);
  }
  const typed = await server;
  rmSync(typed.callLog, { force: true });
  rmSync(typed.cancelLog, { force: true });
  await value(typed.harness, "_earlier = {r['id'] for r in mcp.journal()}\nNone");
  return typed;
}

/** Python: the journal records a test on a shared server made (see `sharedTyped`). */
const THIS_TEST = "[r for r in mcp.journal() if r['id'] not in _earlier]";

/** The typed peer over HTTP on a free port of 127.0.0.1. */
async function launchTypedHttpPeer(env: Record<string, string>) {
  const proc = Bun.spawn([process.execPath, TYPED_PEER, "http", "0"], {
    env: { ...process.env, ...env },
    stdout: "pipe",
    stderr: "ignore",
  });
  const first = new TextDecoder().decode((await proc.stdout.getReader().read()).value);
  const port: number = JSON.parse(first.split("\n")[0] as string).port;
  return {
    url: new URL(`http://127.0.0.1:${port}/mcp`),
    async stop() {
      proc.kill();
      await proc.exited;
    },
  };
}

for (const transport of ["stdio", "http"] as const) {
  describe(`typed peer over ${transport}`, () => {
    test("calls and acall return structuredContent, else the text, else the envelope; mcp.call is unchanged", async () => {
      const { harness } = await sharedTyped(transport);
      const out = await value(
        harness,
        [
          "import asyncio",
          "t = mcp.typed",
          "text = t.read_file(path='a.txt', head=1)",
          "stat = t.files_stat(path='x')",
          "joined = t.two_texts()",
          "envelope = t.picture()",
          "found = await t.search.acall(query='q', limit=5)",
          "many = await asyncio.gather(*(t.get_file.acall(id=str(i)) for i in range(3)))",
          "old = mcp.call('typed', 'read_file', path='a.txt', head=1)",
          "[text, stat, joined, [b['type'] for b in envelope['content']], found, many, sorted(old), old['content'][0]['text']]",
        ].join("\n"),
      );
      expect(out).toEqual([
        "contents of a.txt",
        { path: "x", size: 42, mode: "0644", mtime: "2026-12-01T00:00:00Z" },
        "alpha\nbeta",
        ["text", "image"],
        { matches: [{ path: "a.py", line: 3, score: 0.5 }], total: 1 },
        ["file 0", "file 1", "file 2"],
        ["content"],
        "contents of a.txt",
      ]);
    });

    test("names that are not identifiers are mapped; subscripts take the exact names", async () => {
      const { harness, callLog } = await sharedTyped(transport);
      const out = await value(
        harness,
        [
          "t = mcp.typed",
          "[sorted(n for n in dir(mcp) if 'typed' in n), dir(mcp.my_typed),",
          " t.get_file(id='1'), t._2fa_code(account='me'), t.class_(text='hi!'), t.source_(document='d'),",
          " t.move_file(from_='a', to='b'), t.move_file(**{'from': 'c', 'to': 'd'}),",
          " mcp['my-typed']['get-file'](id='2'), t['files.stat'](path='p')['size'],",
          " t.get_file.tool, t.get_file.server, mcp.my_typed.get_file.server, t.source_.__qualname__]",
        ].join("\n"),
      );
      expect(out).toEqual([
        ["my_typed", "typed"],
        ["count", "get_file", "source"],
        "file 1",
        "123456",
        "excited",
        "source of d",
        "moved a to b",
        "moved c to d",
        "file 2",
        42,
        "get-file",
        "typed",
        "my-typed",
        "mcp.typed.source_",
      ]);
      const sent = lines(callLog).map((line) => [line.tool, line.arguments]);
      expect(sent).toContainEqual(["move_file", { from: "a", to: "b" }]);
      expect(sent).toContainEqual(["2fa-code", { account: "me" }]);
    });

    test("nested object parameters are TypedDicts, checked to the leaf before dispatch", async () => {
      const { harness, callLog } = await sharedTyped(transport);
      const out = await value(
        harness,
        [
          "import inspect, typing",
          "t = mcp.typed",
          "a = t.search(query='q', filter={'kinds': ['code', 'docs'], 'size': {'min': 1, 'max': 9}})",
          "b = t.update_record(id=3, patch={'fields': {'state': 'open'}, 'owner': {'login': 'ann'}})",
          "ann = typing.get_args(inspect.signature(t.search).parameters['filter'].annotation)[0]",
          "[a['total'], b, ann.__name__, sorted(ann.__annotations__), str(inspect.signature(t.update_record))]",
        ].join("\n"),
      );
      expect(out).toEqual([
        1,
        { id: 3, updated: ["fields", "owner"] },
        "Filter",
        ["kinds", "modified_after", "size"],
        "(*, id: int, patch: mcp.typed.Patch) -> mcp.typed.UpdateRecordResult",
      ]);
      expect(lines(callLog).find((line) => line.tool === "search")?.arguments).toEqual({
        query: "q",
        filter: { kinds: ["code", "docs"], size: { min: 1, max: 9 } },
      });
      const before = lines(callLog).length;
      expect(await raised(harness, "mcp.typed.search(query='q', filter={'size': {'min': '1'}})")).toEqual([
        "TypeError",
        `mcp.typed.search() argument 'filter["size"]["min"]' must be int, not str`,
      ]);
      expect(await raised(harness, "mcp.typed.search(query='q', filter={'kinds': ['films']})")).toEqual([
        "TypeError",
        `mcp.typed.search() argument 'filter["kinds"][0]' must be one of "code", "docs", "data"`,
      ]);
      expect(await raised(harness, "mcp.typed.update_record(id=1, patch={'owner': {}})")).toEqual([
        "TypeError",
        `mcp.typed.update_record() argument 'patch["owner"]' is missing the required key "login"`,
      ]);
      expect(await raised(harness, "mcp.typed.update_record(id=1, patch={'colour': 'red'})")).toEqual([
        "TypeError",
        `mcp.typed.update_record() argument 'patch' has the unknown key "colour"`,
      ]);
      expect(lines(callLog).length).toBe(before);
    });

    test("a disallowed tool is invisible and uncallable", async () => {
      const { harness, callLog } = await sharedTyped(transport);
      const out = await value(
        harness,
        [
          "t = mcp.typed",
          "names = dir(t)",
          "[len(names), 'delete_everything' in names, 'delete_everything' in t.source(), 'delete_everything' in mcp.source(),",
          " hasattr(t, 'delete_everything'), sorted(dir(mcp.my_typed))]",
        ].join("\n"),
      );
      expect(out).toEqual([GRANTED.length + 1, false, false, false, false, ["count", "get_file", "source"]]);
      expect(await raised(harness, "mcp.typed.delete_everything(confirm=True)")).toEqual([
        "AttributeError",
        `mcp.typed has no allowed tool 'delete_everything'; dir(mcp.typed) lists them (mcp.typed["name"] takes the exact name)`,
      ]);
      const [kind] = (await raised(harness, "mcp.typed['delete_everything'](confirm=True)")) as string[];
      expect(kind).toBe("KeyError");
      expect((await raised(harness, "mcp.my_typed.search(query='q')"))[0]).toBe("AttributeError");
      expect(await value(harness, `len(${THIS_TEST})`)).toBe(0);
      expect(lines(callLog)).toEqual([]);
    });

    test("signatures, help and dir come from the definitions", async () => {
      const { harness } = await sharedTyped(transport);
      const out = (await value(
        harness,
        [
          "import inspect, pydoc",
          "t = mcp.typed",
          "doc = pydoc.render_doc(t.read_file, renderer=pydoc.plaintext)",
          "[str(inspect.signature(t.read_file)), str(inspect.signature(t.read_file.acall)),",
          " str(inspect.signature(t.annotate)), str(inspect.signature(t.echo_args)), str(inspect.signature(t.move_file)),",
          " inspect.iscoroutinefunction(t.read_file.acall), doc, dir(t)]",
        ].join("\n"),
      )) as [string, string, string, string, string, boolean, string, string[]];
      const readFile =
        "(*, path: str, head: int | None = None, encoding: Literal['utf-8', 'latin-1'] = 'utf-8') -> str | dict";
      expect(out.slice(0, 6)).toEqual([
        readFile,
        readFile,
        "(*, id: int, note: str | None) -> str | dict",
        "(*, label: str | None = None, **other) -> str | dict",
        "(*, from_: str, to: str) -> str | dict",
        true,
      ]);
      const doc = out[6];
      expect(doc).toContain(`read_file${readFile}`);
      expect(doc).toContain("Read the complete contents of a text file from the workspace.");
      expect(doc).toContain("path: str (required) - Path of the file, relative to the workspace root.");
      expect(doc).toContain("head: int | None = None - If set, return only the first N lines of the file.");
      expect(doc).toContain("encoding: Literal['utf-8', 'latin-1'] = 'utf-8' - Text encoding.");
      const expected = [
        ...GRANTED.map((name) =>
          name === "get-file"
            ? "get_file"
            : name === "files.stat"
              ? "files_stat"
              : name === "2fa-code"
                ? "_2fa_code"
                : name === "class" || name === "source"
                  ? `${name}_`
                  : name,
        ),
        "source",
      ].sort();
      expect(out[7]).toEqual(expected);
      // help() itself prints the same text.
      const printed = await harness.run("help(mcp.typed.move_file)");
      expect(printed.stdout).toContain('from_ (sent as "from"): str (required) - Current path.');
    });

    test("bad arguments raise TypeError naming the parameter, before anything is sent or journaled", async () => {
      const { harness, callLog } = await sharedTyped(transport);
      const cases: [string, string][] = [
        ["mcp.typed.read_file()", "mcp.typed.read_file() missing required keyword argument: 'path'"],
        [
          "mcp.typed.read_file(path='a', lines=3)",
          "mcp.typed.read_file() got an unexpected keyword argument 'lines'; its parameters: path, head, encoding",
        ],
        ["mcp.typed.read_file(path=3)", "mcp.typed.read_file() argument 'path' must be str, not int"],
        [
          "mcp.typed.read_file(path='a', head=True)",
          "mcp.typed.read_file() argument 'head' must be int, not bool",
        ],
        [
          "mcp.typed.read_file('a')",
          "mcp.typed.read_file() takes keyword arguments only (got 1 positional); call it as mcp.typed.read_file(path=..., head=..., encoding=...)",
        ],
        ["mcp.typed.annotate(id=1)", "mcp.typed.annotate() missing required keyword argument: 'note'"],
        [
          "mcp.typed.batch(operations=[{'op': 'add'}])",
          `mcp.typed.batch() argument 'operations[0]' is missing the required key "path"`,
        ],
        [
          "await mcp.typed.read_file.acall(path=b'a')",
          "mcp.typed.read_file() argument 'path' is of type bytes, which has no JSON form",
        ],
        [
          "mcp.typed.read_file(path={1, 2})",
          "mcp.typed.read_file() argument 'path' is of type set, which has no JSON form",
        ],
      ];
      for (const [expression, message] of cases) {
        expect(await raised(harness, expression)).toEqual(["TypeError", message]);
      }
      expect(await value(harness, THIS_TEST)).toEqual([]);
      expect(lines(callLog)).toEqual([]);
      // None leaves an optional parameter out; a parameter whose schema takes null sends it.
      expect(
        await value(
          harness,
          "[mcp.typed.read_file(path='a', head=None), mcp.typed.annotate(id=1, note=None)]",
        ),
      ).toEqual(["contents of a\nline 2\nline 3", "cleared"]);
      expect(lines(callLog).map((line) => line.arguments)).toEqual([{ path: "a" }, { id: 1, note: null }]);
    });

    test("a failed tool raises McpToolError with its text, envelope and journal id", async () => {
      const { harness } = await sharedTyped(transport);
      const out = await value(
        harness,
        [
          "try:",
          "    mcp.typed.fail(reason='no disk')",
          "except mcp.McpToolError as e:",
          "    err = e",
          "record = [r for r in mcp.journal() if r['id'] == err.journal_id]",
          "[isinstance(err, RuntimeError), isinstance(err, mcp.ToolError), str(err), err.text, err.envelope['isError'],",
          " err.result is err.envelope, [r['status'] for r in record], [r['tool'] for r in record]]",
        ].join("\n"),
      );
      expect(out).toEqual([
        true,
        true,
        "MCP tool failed: failed: no disk",
        "failed: no disk",
        true,
        true,
        ["tool_error"],
        ["fail"],
      ]);
    });

    test("a cancelled acall is cancelled downstream and journaled as outcome unknown", async () => {
      const { harness, cancelLog } = await sharedTyped(transport);
      const out = await value(
        harness,
        [
          "import asyncio, time",
          // The peer is shared: what it counts from here on is this test's. The count call is not.
          "calls_before = mcp.typed.count()['calls']",
          "_earlier = {r['id'] for r in mcp.journal()}",
          "in_flight = lambda records: any(r['status'] == 'dispatched' and r['id'] not in _earlier for r in records)",
          "task = asyncio.ensure_future(mcp.typed.slow.acall(seconds=60))",
          "deadline = time.monotonic() + 20",
          "while not in_flight(await mcp.ajournal()):",
          "    assert time.monotonic() < deadline, 'the call was never dispatched'",
          "    await asyncio.sleep(0.02)",
          "task.cancel()",
          "try:",
          "    await task",
          "    outcome = 'finished'",
          "except asyncio.CancelledError:",
          "    outcome = 'cancelled'",
          "while in_flight(await mcp.ajournal()):",
          "    assert time.monotonic() < deadline, 'the call never ended in the journal'",
          "    await asyncio.sleep(0.02)",
          `[outcome, [(r['tool'], r['status']) for r in ${THIS_TEST}], mcp.typed.count()['calls'] - calls_before]`,
        ].join("\n"),
      );
      expect(out).toEqual(["cancelled", [["slow", "outcome_unknown"]], 2]);
      await waitFor(() => lines(cancelLog).some((line) => line.tool === "slow"), {
        timeoutMs: 10_000,
        what: "the peer to receive the cancellation",
      });
    });

    test("definitions are cached per registry generation; mcp.refresh() renews them", async () => {
      const { harness } = await typedServer(transport);
      expect(await value(harness, "dir(mcp.my_typed)")).toEqual(["count", "get_file", "source"]);
      const registry = JSON.parse(readFileSync(join(harness.project, ".mcp.json"), "utf8"));
      registry.mcpServers["my-typed"].allowedTools = ["count", "class"];
      registry.mcpServers.extra = registry.mcpServers.typed;
      writeFileSync(join(harness.project, ".mcp.json"), JSON.stringify(registry));
      // Without a refresh (and within the 30 s re-read) the functions of the last generation stay.
      expect(await value(harness, "dir(mcp.my_typed)")).toEqual(["count", "get_file", "source"]);
      const out = await value(
        harness,
        [
          "f = mcp.my_typed.get_file",
          "mcp.refresh()",
          "[dir(mcp.my_typed), sorted(n for n in dir(mcp) if 'typed' in n or n == 'extra'), mcp.my_typed.class_(text='x')]",
        ].join("\n"),
      );
      expect(out).toEqual([["class_", "count", "source"], ["extra", "my_typed", "typed"], "calm"]);
      // A function kept from the old generation still goes through the broker, which refuses it now.
      const [kind, message] = (await raised(harness, "f(id='1')")) as string[];
      expect(kind).toBe("ToolError");
      expect(message).toContain("Tool denied by broker allowedTools policy");
    });
  });
}

describe("stubs", () => {
  test("source() is valid Python at most a third the size of the JSON definitions", async () => {
    const { harness } = await sharedTyped("stdio");
    const out = (await printed(
      harness,
      [
        "import ast, json",
        "src = mcp.typed.source()",
        "ast.parse(src)",
        "defs = json.dumps(mcp.list_tools('typed'), separators=(',', ':'))",
        "print(json.dumps([len(src.encode()), len(defs.encode()), src, mcp.source()]))",
      ].join("\n"),
    )) as [number, number, string, string];
    const [stub, json, source, all] = out;
    expect(stub / json).toBeLessThanOrEqual(1 / 3);
    expect(source).toContain(
      "def read_file(*, path: str, head: int | None = None, encoding: Literal['utf-8', 'latin-1'] = 'utf-8') -> str | dict:",
    );
    expect(source).toContain("class Filter(TypedDict, total=False):");
    expect(source).toContain("    size: Size");
    expect(source).toContain('# "get-file"\ndef get_file(*, id: str) -> str | dict:');
    expect(source).toContain(
      "def search(*, query: str, filter: Filter | None = None, limit: int = 20) -> SearchResult:",
    );
    expect(all).toContain("# mcp.typed: 19 tools.");
    expect(all).toContain('# mcp["my-typed"]: 2 tools.');
  });
});

describe("server-memory from npm", () => {
  test("typed functions, nested parameters and stubs for a real third-party server", async () => {
    const memoryFile = tempFile("repl-mcp-memory");
    const harness = await start({
      memory: { command: "node", args: [MEMORY_SERVER], env: { MEMORY_FILE_PATH: memoryFile } },
    });
    const out = (await printed(
      harness,
      [
        "import ast, inspect, json",
        "m = mcp.memory",
        "created = m.create_entities(entities=[{'name': 'repl', 'entityType': 'tool', 'observations': ['works']}])",
        "m.create_relations(relations=[{'from': 'repl', 'to': 'repl', 'relationType': 'uses'}])",
        "graph = await m.read_graph.acall()",
        "src = m.source()",
        "ast.parse(src)",
        "defs = json.dumps(mcp.list_tools('memory'), separators=(',', ':'))",
        "try:",
        "    m.create_entities(entities=[{'name': 'x', 'entityType': 'tool'}])",
        "    err = None",
        "except TypeError as e:",
        "    err = str(e)",
        "print(json.dumps([created['entities'][0]['name'], graph['relations'], str(inspect.signature(m.create_entities)), err,",
        " len(src.encode()), len(defs.encode()), src, len(mcp.journal())]))",
      ].join("\n"),
    )) as [string, unknown, string, string, number, number, string, number];
    expect(out[0]).toBe("repl");
    expect(out[1]).toEqual([{ from: "repl", to: "repl", relationType: "uses" }]);
    expect(out[2]).toBe("(*, entities: list[mcp.memory.Entity]) -> mcp.memory.CreateEntitiesResult");
    expect(out[3]).toBe(
      `mcp.memory.create_entities() argument 'entities[0]' is missing the required key "observations"`,
    );
    expect(out[4] / out[5]).toBeLessThanOrEqual(1 / 3);
    expect(out[6]).toContain(
      'Relation = TypedDict("Relation", {"from": str, "to": str, "relationType": str})',
    );
    expect(out[7]).toBe(3);
  });
});
