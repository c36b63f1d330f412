// `npm run bench` (after the others): a Jupyter kernel's round trip, measured side by side in one run on
// Debian's Jupyter Server on loopback. A warm `1+1` (execute_request until its reply and idle) through
// three clients, in interleaved blocks: a minimal client of our own that answers every message at once
// with a pong (the reference), src/kernels/jupyter.ts as the product uses it (the same prompt answer,
// through @jupyterlab/services), and the same module without it (the naive client: 40 ms of delayed
// ACK per round trip). Then a kernel's start: bare REST POST until the first kernel_info reply, against
// the product's start. Skips, saying why, without Jupyter.
//
//   bun run bench/kernels.ts
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { KernelServer } from "../src/kernels/config.ts";
import { JupyterLink, type KernelLink } from "../src/kernels/jupyter.ts";
import { JupyterServer, jupyterMissing } from "../tests/support/jupyter.ts";
import { start } from "./lib/mcp.ts";
import { formatMs, formatRatio, median } from "./lib/stats.ts";

const BINARY = resolve(import.meta.dir, "../dist/repl-mcp");

const PLAN = { warmup: 30, blocks: 20, perBlock: 10, starts: 5 };

/** The reference: REST and the kernel WebSocket by hand, a pong after every message received. */
class MinimalClient {
  private readonly session = crypto.randomUUID();
  private waiting: { id: string; reply: boolean; idle: boolean; done: () => void } | undefined;

  private constructor(private readonly socket: WebSocket) {
    socket.addEventListener("message", (event) => {
      (socket as unknown as { pong(): void }).pong();
      const message = JSON.parse(String(event.data));
      const wait = this.waiting;
      if (!wait || message.parent_header?.msg_id !== wait.id) return;
      if (message.channel === "shell") wait.reply = true;
      if (message.msg_type === "status" && message.content.execution_state === "idle") wait.idle = true;
      if (wait.reply && wait.idle) wait.done();
    });
  }

  static async open(url: string, token: string, kernelId: string): Promise<MinimalClient> {
    const ws = url.replace(/^http/, "ws");
    const socket = new WebSocket(`${ws}api/kernels/${kernelId}/channels`, {
      headers: { authorization: `token ${token}` },
    } as unknown as string[]);
    await new Promise((resolve, reject) => {
      socket.addEventListener("open", resolve, { once: true });
      socket.addEventListener("error", reject, { once: true });
    });
    return new MinimalClient(socket);
  }

  request(msgType: string, content: Record<string, unknown>): Promise<void> {
    const id = crypto.randomUUID();
    const header = {
      msg_id: id,
      msg_type: msgType,
      session: this.session,
      username: "",
      date: "",
      version: "5.3",
    };
    return new Promise((done) => {
      this.waiting = { id, reply: false, idle: false, done };
      this.socket.send(
        JSON.stringify({ channel: "shell", header, parent_header: {}, metadata: {}, content }),
      );
    });
  }

  execute(code: string): Promise<void> {
    return this.request("execute_request", {
      code,
      silent: true,
      store_history: false,
      user_expressions: {},
      allow_stdin: false,
      stop_on_error: false,
    });
  }

  close(): void {
    this.socket.close();
  }
}

async function time(run: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await run();
  return performance.now() - started;
}

/** Each contender warmed up, then timed in blocks that rotate who goes first (no one always follows the same). */
async function interleaved(contenders: { label: string; run: () => Promise<unknown> }[]) {
  const samples = new Map<string, number[]>(contenders.map((contender) => [contender.label, []]));
  for (const contender of contenders) for (let i = 0; i < PLAN.warmup; i++) await contender.run();
  for (let block = 0; block < PLAN.blocks; block++) {
    for (let i = 0; i < contenders.length; i++) {
      const contender = contenders[(block + i) % contenders.length] as (typeof contenders)[number];
      for (let j = 0; j < PLAN.perBlock; j++) samples.get(contender.label)?.push(await time(contender.run));
    }
  }
  return samples;
}

async function restKernel(
  jupyter: JupyterServer,
  method: string,
  path = "",
  body?: unknown,
): Promise<{ id: string } | undefined> {
  const response = await fetch(`${jupyter.url}api/kernels${path}`, {
    method,
    headers: { authorization: `token ${jupyter.token}` },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return response.status === 204 ? undefined : ((await response.json()) as { id: string });
}

async function roundTrips(jupyter: JupyterServer, server: KernelServer) {
  const links: { label: string; link: JupyterLink; kernel: KernelLink }[] = [];
  for (const [label, promptAck] of [
    ["src/kernels/jupyter.ts", true],
    ["the same without the prompt ACK (naive)", false],
  ] as const) {
    const link = new JupyterLink(server, { promptAck });
    links.push({ label, link, kernel: await link.start("python3") });
  }
  const bare = (await restKernel(jupyter, "POST", "", { name: "python3" })) as { id: string };
  const minimal = await MinimalClient.open(jupyter.url, jupyter.token, bare.id);
  await minimal.request("kernel_info_request", {});
  const contenders = [
    { label: "minimal client, prompt ACK (reference)", run: () => minimal.execute("1+1") },
    ...links.map(({ label, kernel }) => ({ label, run: () => kernel.execute("1+1") })),
  ];
  const samples = await interleaved(contenders);
  minimal.close();
  await restKernel(jupyter, "DELETE", `/${bare.id}`);
  for (const { link, kernel } of links) {
    await kernel.shutdown();
    link.dispose();
  }
  return samples;
}

async function starts(jupyter: JupyterServer, server: KernelServer) {
  const bare: number[] = [];
  const product: number[] = [];
  for (let i = 0; i < PLAN.starts; i++) {
    bare.push(
      await time(async () => {
        const kernel = (await restKernel(jupyter, "POST", "", { name: "python3" })) as { id: string };
        const client = await MinimalClient.open(jupyter.url, jupyter.token, kernel.id);
        await client.request("kernel_info_request", {});
        client.close();
        await restKernel(jupyter, "DELETE", `/${kernel.id}`);
      }),
    );
    product.push(
      await time(async () => {
        const link = new JupyterLink(server);
        const kernel = await link.start("python3");
        await kernel.info();
        await kernel.shutdown();
        link.dispose();
      }),
    );
  }
  return { bare, product };
}

/** The product over stdio: one server with --kernels, one without (the local figures must not move). */
async function sessions(jupyter: JupyterServer) {
  const dir = mkdtempSync(join(tmpdir(), "repl-mcp-bench-kernels-"));
  const file = join(dir, "kernels.json");
  writeFileSync(
    file,
    JSON.stringify({ kernelServers: { lab: { url: jupyter.url, token: "${BENCH_TOKEN}" } } }),
  );
  const env = { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: dir, BENCH_TOKEN: jupyter.token };
  const spec = (label: string, args: string[]) => ({ label, command: BINARY, args, env, cwd: dir });
  const { served: withKernels } = await start(spec("with --kernels", ["--kernels", file]));
  const { served: plain } = await start(spec("without", []));
  try {
    const opens: number[] = [];
    const bareStarts: number[] = [];
    for (let i = 0; i < PLAN.starts; i++) {
      let id = "";
      opens.push(
        await time(async () => {
          const opened = await withKernels.call("python_session_open", { name: "b", kernel_server: "lab" });
          id = (opened.structuredContent as { session_id: string }).session_id;
        }),
      );
      await withKernels.call("python_session_close", { session_id: id });
      let kernel = "";
      bareStarts.push(
        await time(async () => {
          kernel = ((await restKernel(jupyter, "POST", "", { name: "python3" })) as { id: string }).id;
          const client = await MinimalClient.open(jupyter.url, jupyter.token, kernel);
          await client.request("kernel_info_request", {});
          client.close();
        }),
      );
      await restKernel(jupyter, "DELETE", `/${kernel}`);
    }
    const opened = await withKernels.call("python_session_open", { name: "warm", kernel_server: "lab" });
    const session = (opened.structuredContent as { session_id: string }).session_id;
    const bare = (await restKernel(jupyter, "POST", "", { name: "python3" })) as { id: string };
    const minimal = await MinimalClient.open(jupyter.url, jupyter.token, bare.id);
    await minimal.request("kernel_info_request", {});
    const contenders = [
      { label: "minimal client, prompt ACK (reference)", run: () => minimal.execute("1+1") },
      {
        label: "repl-mcp kernel session (execute_python)",
        run: () => withKernels.call("execute_python", { session_id: session, code: "1+1" }),
      },
      {
        label: "repl-mcp local session, --kernels given",
        run: () => withKernels.call("execute_python", { code: "1+1" }),
      },
      {
        label: "repl-mcp local session, no --kernels",
        run: () => plain.call("execute_python", { code: "1+1" }),
      },
    ];
    const samples = await interleaved(contenders);
    minimal.close();
    await restKernel(jupyter, "DELETE", `/${bare.id}`);
    return { opens, bareStarts, samples };
  } finally {
    await withKernels.stop();
    await plain.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

function table(
  samples: Map<string, number[]>,
  referenceLabel: string,
  reference = median(samples.get(referenceLabel) ?? []),
) {
  console.log("| client | median | × reference |\n|---|---|---|");
  for (const [label, values] of samples) {
    console.log(`| ${label} | ${formatMs(median(values))} | ${formatRatio(median(values) / reference)} |`);
  }
}

const missing = jupyterMissing();
if (missing) {
  console.log(`\n## Jupyter kernels\n\nskipped: ${missing}`);
  process.exit(0);
}
// The services announce each socket with console.debug; the report is all this prints.
console.debug = () => {};
const jupyter = await JupyterServer.start();
try {
  const server: KernelServer = { ...jupyter.entry("bench"), kernel: "python3" };
  const samples = await roundTrips(jupyter, server);
  const reference = median(samples.get("minimal client, prompt ACK (reference)") ?? []);
  console.log("\n## Jupyter kernels (Jupyter Server on loopback)\n");
  console.log(`warm \`1+1\`, median of ${PLAN.blocks * PLAN.perBlock} round trips each, interleaved:\n`);
  console.log("| client | median | × reference |\n|---|---|---|");
  for (const [label, values] of samples) {
    console.log(`| ${label} | ${formatMs(median(values))} | ${formatRatio(median(values) / reference)} |`);
  }
  const started = await starts(jupyter, server);
  console.log(`\nkernel start until its kernel_info reply, then shutdown, median of ${PLAN.starts}:\n`);
  console.log("| | median | × bare |\n|---|---|---|");
  const bareStart = median(started.bare);
  console.log(`| bare REST + socket | ${formatMs(bareStart)} | 1.00× |`);
  console.log(
    `| src/kernels/jupyter.ts | ${formatMs(median(started.product))} | ${formatRatio(median(started.product) / bareStart)} |`,
  );
  const product = await sessions(jupyter);
  console.log("\n### Through the product (dist/repl-mcp over stdio)\n");
  console.log(`warm \`1+1\` as a tool call, median of ${PLAN.blocks * PLAN.perBlock} each, interleaved:\n`);
  table(product.samples, "minimal client, prompt ACK (reference)");
  const local = median(product.samples.get("repl-mcp local session, no --kernels") ?? []);
  const localWith = median(product.samples.get("repl-mcp local session, --kernels given") ?? []);
  console.log(`\nlocal session with --kernels given ÷ without: ${formatRatio(localWith / local)}`);
  const openMs = median(product.opens);
  const bareMs = median(product.bareStarts);
  console.log(`\nopening a kernel session, median of ${PLAN.starts}:\n`);
  console.log("| | median | × bare |\n|---|---|---|");
  console.log(`| bare kernel start (REST POST + socket + kernel_info) | ${formatMs(bareMs)} | 1.00× |`);
  console.log(
    `| python_session_open(kernel_server) | ${formatMs(openMs)} | ${formatRatio(openMs / bareMs)} |`,
  );
} finally {
  await jupyter.stop();
}
