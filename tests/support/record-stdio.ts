// A recording stdio wrapper, for tests with a real MCP client that launches its servers itself:
//   bun tests/support/record-stdio.ts LOG -- COMMAND [ARGS...]
// runs COMMAND with stdin and stdout piped through, and appends one JSON line to LOG per line either side
// wrote: {"from": "client" | "server", "at": ms since the wrapper started, "line": the line as sent}.
// stderr is passed through untouched. The client closing stdin closes the server's; a signal to the wrapper
// is passed on; the wrapper exits with the server's status once the server is gone.
import { appendFileSync } from "node:fs";

const [log, separator, command, ...args] = process.argv.slice(2);
if (!log || separator !== "--" || !command) {
  process.stderr.write("usage: record-stdio.ts LOG -- COMMAND [ARGS...]\n");
  process.exit(2);
}

const started = Date.now();
const server = Bun.spawn([command, ...args], { stdin: "pipe", stdout: "pipe", stderr: "inherit" });

/** Splits a byte stream into lines, records each, and hands the bytes on unchanged. */
async function relay(
  from: "client" | "server",
  input: ReadableStream<Uint8Array>,
  write: (chunk: Uint8Array) => void,
): Promise<void> {
  const decoder = new TextDecoder();
  let partial = "";
  for await (const chunk of input) {
    partial += decoder.decode(chunk, { stream: true });
    let newline = partial.indexOf("\n");
    while (newline >= 0) {
      const line = partial.slice(0, newline).replace(/\r$/, "");
      appendFileSync(log as string, `${JSON.stringify({ from, at: Date.now() - started, line })}\n`);
      partial = partial.slice(newline + 1);
      newline = partial.indexOf("\n");
    }
    write(chunk);
  }
  if (partial !== "")
    appendFileSync(log as string, `${JSON.stringify({ from, at: Date.now() - started, line: partial })}\n`);
}

for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"] as const) {
  process.on(signal, () => server.kill(signal));
}

const toServer = relay("client", Bun.stdin.stream(), (chunk) => {
  server.stdin.write(chunk);
  server.stdin.flush();
}).finally(() => server.stdin.end());
const toClient = relay("server", server.stdout, (chunk) => {
  process.stdout.write(chunk);
});

const code = await server.exited;
await toClient;
void toServer;
process.exit(code);
