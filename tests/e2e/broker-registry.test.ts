// Issue 12, defects 1, 2, 4 and 5: the broker with no registry (disabled), with a registry that fails
// to load, what mcp.explain names as its evidence, and how long a failed connect is remembered.
// runner: waiting lane
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { Harness, cellValue as value, waitFor } from "../support/harness.ts";

const STDIO_PEER = resolve(import.meta.dir, "../fixtures/peers/stdio-peer.ts");
const peerEntry = () => ({ command: process.execPath, args: [STDIO_PEER] });

// The tests run concurrently, each on a server of its own: the last one waits out a 30 s reload.
const started: Harness[] = [];
afterAll(async () => {
  await Promise.all(started.map((harness) => harness.close()));
});

async function start(options: {
  servers?: Record<string, unknown>;
  args?: string[];
  env?: Record<string, string>;
}) {
  const h = await Harness.start({
    args: options.args,
    env: options.env,
    beforeStart: (project) => {
      if (options.servers)
        writeFileSync(join(project, ".mcp.json"), JSON.stringify({ mcpServers: options.servers }));
    },
  });
  started.push(h);
  return h;
}

/** The exception (type name and message) each expression raises, or "no error". */
async function raised(harness: Harness, expressions: string[]): Promise<string[]> {
  const code = [
    "out = []",
    `for expr in ${JSON.stringify(expressions)}:`,
    "    try:",
    "        eval(expr)",
    "        out.append('no error')",
    "    except Exception as e:",
    "        out.append(type(e).__name__ + ': ' + str(e))",
    "out",
  ].join("\n");
  return value(harness, code);
}

describe("defect 1: a disabled broker has an empty registry", () => {
  test.concurrent.each([
    ["--mcp-scope none", { args: ["--mcp-scope", "none"] }],
    ["REPL_MCP_NO_BRIDGE=1", { env: { REPL_MCP_NO_BRIDGE: "1" } }],
  ])("%s: servers() and help() are [], explain says broker_disabled", async (_label, options) => {
    const harness = await start({ servers: { peer: peerEntry() }, ...options });
    expect(await value(harness, "[mcp.servers(), mcp.help()]")).toEqual([[], []]);
    const explained = await value(harness, "mcp.explain('peer')");
    expect(explained.status).toBe("broker_disabled");
    expect(explained.evidence).toBe("configuration");
    // Using a server is still refused, with a reason.
    const [call] = await raised(harness, ["mcp.call('peer', 'whoami')"]);
    expect(call).toContain("disabled");
    expect((await harness.health()).broker.enabled).toBe(false);
  });
});

describe("defect 2: a registry that fails to load fails every broker operation but explain", () => {
  const CONFIG_ERROR = /^ToolError: MCP configuration error: .+; repair registry then mcp\.refresh\(\)$/;

  test.concurrent("FIFO, sse transport, unknown field and missing ${VAR}: refresh, servers, list_tools and call fail", async () => {
    const harness = await start({ servers: { peer: peerEntry() } });
    const registry = join(harness.project, ".mcp.json");
    expect(await value(harness, "mcp.servers()")).toEqual(["peer"]);
    const broken: [string, () => void, string][] = [
      [
        "unknown field",
        () =>
          writeFileSync(
            registry,
            JSON.stringify({ mcpServers: { peer: { ...peerEntry(), secretish: "v4lue-1" } } }),
          ),
        "config_invalid",
      ],
      [
        "sse transport",
        () =>
          writeFileSync(
            registry,
            JSON.stringify({ mcpServers: { peer: { type: "sse", url: "http://127.0.0.1:9/v4lue-2" } } }),
          ),
        "config_invalid",
      ],
      [
        "missing variable",
        () =>
          writeFileSync(
            registry,
            JSON.stringify({
              mcpServers: { peer: { ...peerEntry(), env: { TOKEN: "${REPL_TEST_ABSENT_VAR}" } } },
            }),
          ),
        "credentials_missing",
      ],
      [
        "FIFO",
        () => {
          rmSync(registry);
          Bun.spawnSync(["mkfifo", registry]);
        },
        "config_invalid",
      ],
    ];
    for (const [label, breakIt, status] of broken) {
      breakIt();
      const errors = await raised(harness, [
        "mcp.refresh()",
        "mcp.servers()",
        "mcp.list_tools('peer')",
        "mcp.call('peer', 'whoami')",
      ]);
      for (const error of errors) {
        expect({ label, error }).toEqual({ label, error: expect.stringMatching(CONFIG_ERROR) });
        expect(error).not.toMatch(/v4lue|REPL_TEST_ABSENT_VAR|9\/v4lue/);
      }
      // Plain Python, health and explain keep working.
      expect(await value(harness, "6 * 7")).toBe(42);
      const health = await harness.health();
      expect(health.broker.configuration_error).toBeString();
      const explained = await value(harness, "mcp.explain('peer')");
      expect({ label, status: explained.status }).toEqual({ label, status });
      expect(explained.evidence).toBe("configuration");
    }
    // Repaired, refresh succeeds and returns the health without an error.
    rmSync(registry);
    writeFileSync(registry, JSON.stringify({ mcpServers: { peer: peerEntry() } }));
    expect(await value(harness, "mcp.refresh()['configuration_error'] is None")).toBe(true);
    expect(await value(harness, "mcp.servers()")).toEqual(["peer"]);
  }, 60_000);
});

describe("defect 4: explain's evidence is one word naming what the verdict rests on", () => {
  test.concurrent("each status names its evidence as a string", async () => {
    const harness = await start({
      servers: {
        peer: peerEntry(),
        narrow: { ...peerEntry(), allowedTools: ["whoami"] },
        off: { ...peerEntry(), disabled: true },
        broken: { command: "/nonexistent/peer-binary" },
      },
    });
    const evidence = async (args: string) => {
      const explained = await value(harness, `mcp.explain(${args})`);
      return [explained.status, explained.evidence];
    };
    expect(await evidence("'nobody'")).toEqual(["server_absent", "configuration"]);
    expect(await evidence("'off'")).toEqual(["not_granted", "configuration"]);
    expect(await evidence("'narrow', 'echo'")).toEqual(["not_granted", "configuration"]);
    expect(await evidence("'peer'")).toEqual(["disconnected", "transport_state"]);
    await raised(harness, ["mcp.call('broken', 'x')"]);
    expect(await evidence("'broken'")).toEqual(["disconnected", "last_connection_attempt"]);
    await value(harness, "len(mcp.list_tools('peer'))");
    expect(await evidence("'peer'")).toEqual(["ready", "transport_state"]);
    expect(await evidence("'peer', 'whoami'")).toEqual(["ready", "cached_catalogue"]);
    expect(await evidence("'peer', 'no_such_tool'")).toEqual(["tool_missing", "cached_catalogue"]);
  });
});

describe("defect 5: the failed-connect cooldown survives the automatic registry reload", () => {
  test.concurrent("a failure is still remembered after the 30 s reload; refresh retries at once", async () => {
    const attempts = join(Bun.env.TMPDIR ?? "/tmp", `attempts-${crypto.randomUUID()}`);
    try {
      // Peers that record each start and exit at once, so each connect attempt leaves one line.
      const failing = (code: number) => ({
        command: "/bin/sh",
        args: ["-c", `echo start >> '${attempts}'; exit ${code}`],
      });
      const harness = await start({
        servers: { failing: failing(3), edited: failing(4), peer: peerEntry() },
      });
      const registry = join(harness.project, ".mcp.json");
      const count = () => (existsSync(attempts) ? readFileSync(attempts, "utf8").split("\n").length - 1 : 0);
      const first = await raised(harness, ["mcp.call('failing', 'x')", "mcp.call('edited', 'x')"]);
      for (const error of first) expect(error).toContain("MCP connection failed");
      const failedAt = Date.now();
      expect(count()).toBe(2);
      // One entry changes before the reload: its failure belongs to the old entry and is dropped.
      writeFileSync(
        registry,
        JSON.stringify({ mcpServers: { failing: failing(3), edited: failing(5), peer: peerEntry() } }),
      );

      // The registry reloads itself on the first broker operation 30 s after it was loaded.
      await waitFor(() => Date.now() - failedAt > 31_000, { timeoutMs: 40_000, what: "the reload interval" });
      expect(await value(harness, "mcp.servers()")).toEqual(["edited", "failing", "peer"]);
      const [unchanged] = await raised(harness, ["mcp.call('failing', 'x')"]);
      expect(unchanged).toContain("MCP connection recently failed");
      expect(count()).toBe(2);
      expect((await value(harness, "mcp.explain('failing')")).evidence).toBe("last_connection_attempt");
      const [edited] = await raised(harness, ["mcp.call('edited', 'x')"]);
      expect(edited).toContain("MCP connection failed");
      expect(count()).toBe(3);

      // An explicit refresh forgets every failure: the next call tries again.
      await value(harness, "mcp.refresh()");
      const [third] = await raised(harness, ["mcp.call('failing', 'x')"]);
      expect(third).toContain("MCP connection failed");
      expect(count()).toBe(4);
    } finally {
      rmSync(attempts, { force: true });
    }
  }, 90_000);
});
