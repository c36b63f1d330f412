// The command line a human meets: --help, colour rules, and every usage error (one line and a hint
// on stderr, exit status 2, nothing on stdout).
import { expect, test } from "bun:test";
import { DOCTOR_FLAGS, SERVE_FLAGS } from "../../src/cli/flags.ts";
import { BINARY, tempDir } from "../support/harness.ts";
import { run } from "../support/run.ts";

const ESC = "\u001b[";

function runBinary(args: string[], env: Record<string, string> = {}, cwd?: string) {
  return run([BINARY, ...args], {
    cwd: cwd ?? tempDir(),
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: "/nonexistent", ...env },
    stdin: "pipe",
    timeoutMs: 20_000,
  });
}

/** Runs the binary on a pseudo-terminal (util-linux `script`), so stdout and stderr are TTYs. */
async function onTerminal(args: string[], env: Record<string, string> = {}) {
  const command = [BINARY, ...args].map((part) => `'${part}'`).join(" ");
  const proc = Bun.spawn(["script", "-qec", command, "/dev/null"], {
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", TERM: "xterm", ...env },
    stdin: "pipe",
    stdout: "pipe",
    stderr: "pipe",
  });
  const [stdout, code] = await Promise.all([new Response(proc.stdout).text(), proc.exited]);
  return { stdout, code };
}

test("--help lists every public flag, the environment and a client configuration to copy", async () => {
  const { stdout, stderr, code } = await runBinary(["--help"]);
  expect(code).toBe(0);
  expect(stderr).toBe("");
  for (const flag of Object.keys(SERVE_FLAGS)) expect(stdout).toContain(`--${flag}`);
  for (const flag of [
    "--journal <path>",
    "--oauth-login <server>",
    "--config <path>",
    "--help",
    "--version",
    "doctor",
  ]) {
    expect(stdout).toContain(flag);
  }
  for (const name of [
    "REPL_MCP_PYTHON",
    "REPL_MCP_NO_BRIDGE=1",
    "REPL_MCP_LOG_LEVEL",
    "NO_COLOR",
    "FORCE_COLOR",
  ]) {
    expect(stdout).toContain(name);
  }
  expect(stdout).toContain("Over HTTP with no token given, each start makes one");
  expect(stdout).not.toContain("guardian");
  expect(stdout).not.toContain(ESC);
  // The example is valid JSON naming this very binary.
  const start = stdout.lastIndexOf("{", stdout.indexOf('"mcpServers"'));
  const example = JSON.parse(stdout.slice(start, stdout.indexOf("\n  }\n", start) + 4));
  expect(example.mcpServers["repl-mcp"]).toEqual({ command: BINARY, args: ["--transport", "stdio"] });
  expect((await runBinary(["-h"])).stdout).toBe(stdout);
});

test("doctor --help lists doctor's flags", async () => {
  const { stdout, code } = await runBinary(["doctor", "--help"]);
  expect(code).toBe(0);
  for (const flag of Object.keys(DOCTOR_FLAGS)) expect(stdout).toContain(`--${flag}`);
  expect(stdout).toContain("Exit status 0 when nothing is wrong, 1 when something is");
});

test("colour only on a terminal, unless NO_COLOR or FORCE_COLOR say otherwise", async () => {
  expect((await runBinary(["--help"], { FORCE_COLOR: "1" })).stdout).toContain(ESC);
  expect((await runBinary(["--help"], { FORCE_COLOR: "0" })).stdout).not.toContain(ESC);
  expect((await runBinary(["--frobnicate"], { FORCE_COLOR: "1" })).stderr).toContain(ESC);
  const terminal = await onTerminal(["--help"]);
  expect(terminal.code).toBe(0);
  expect(terminal.stdout).toContain("--journal");
  expect(terminal.stdout).toContain(ESC);
  const plain = await onTerminal(["--help"], { NO_COLOR: "1" });
  expect(plain.stdout).toContain("--journal");
  expect(plain.stdout).not.toContain(ESC);
  const errorOnTerminal = await onTerminal(["--frobnicate"], { NO_COLOR: "1" });
  expect(errorOnTerminal.code).toBe(2);
  expect(errorOnTerminal.stdout).not.toContain(ESC);
});

test("every usage error: one line and a hint on stderr, exit status 2, nothing on stdout", async () => {
  const cases: [string[], string][] = [
    [["--frobnicate"], "unknown option --frobnicate"],
    [["-x"], "unknown option -x"],
    [["serve"], 'unexpected argument "serve"'],
    [["--transport", "sse"], '--transport must be stdio or http (got "sse")'],
    [["--max-memory-mib", "lots"], '--max-memory-mib takes a whole number of MiB, 0 to disable (got "lots")'],
    [["--max-memory-mib", "-1"], "--max-memory-mib takes a whole number"],
    [
      ["--log-level", "loud"],
      '--log-level must be one of silent, error, warn, info, debug, trace (got "loud")',
    ],
    [["--mcp-scope", "plugin"], "--mcp-scope: MCP scopes must be project, user, local, all or none"],
    [["--python="], "--python needs a value"],
    [["--config="], "--config needs a value"],
    [["--journal="], "--journal needs a value"],
    [["--journal"], "--journal needs a value"],
    [["--oauth-login="], "--oauth-login needs a value"],
    [["doctor", "--frobnicate"], "unknown option --frobnicate"],
    [["doctor", "--mcp-scope", "everything"], "--mcp-scope: MCP scopes must be"],
    [["doctor", "extra"], 'unexpected argument "extra"'],
  ];
  for (const [args, message] of cases) {
    const { stdout, stderr, code } = await runBinary(args);
    expect({ args, code, stdout }).toEqual({ args, code: 2, stdout: "" });
    const lines = stderr.trimEnd().split("\n");
    expect({ args, lines: lines.length }).toEqual({ args, lines: 2 });
    expect(lines[0]).toStartWith("repl-mcp: error: ");
    expect(lines[0]).toContain(message);
    const hint = args[0] === "doctor" ? "Run 'repl-mcp doctor --help'" : "Run 'repl-mcp --help'";
    expect(lines[1]).toStartWith(hint);
  }
  const fromEnv = await runBinary([], { REPL_MCP_LOG_LEVEL: "chatty" });
  expect(fromEnv.code).toBe(2);
  expect(fromEnv.stderr).toContain(
    '--log-level must be one of silent, error, warn, info, debug, trace (got "chatty")',
  );
});

test("a deleted launch directory stops the start-up with status 1 and one line", async () => {
  const dir = tempDir();
  const { stdout, stderr, code } = await run(
    ["sh", "-c", `mkdir gone && cd gone && rmdir ../gone && exec '${BINARY}'`],
    { cwd: dir, stdin: "pipe", timeoutMs: 20_000 },
  );
  // Bun's runtime notices first, before any of our code runs; its own message is clear enough.
  expect(code).toBe(1);
  expect(stdout).toBe("");
  expect(stderr).toContain("working directory was deleted");
  expect(stderr.trim().split("\n")).toHaveLength(1);
});
