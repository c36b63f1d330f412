// `npm run bench` (after the others): what containment (--sandbox) costs, measured side by side in one run
// against the same server without it, same interpreter, same kind of project:
//   - a warm `1+1` (interleaved blocks, median of each; target: contained ≤ 1.05× uncontained);
//   - a worker start (`reset: true` on a trivial cell, each starting a new worker; target: ≤ 60 ms more);
//   - a 50 MB download from a host in a network namespace of the bench's own, read by a cell with
//     urllib (through the sandbox's proxy when contained, allowed by the policy file; direct when not;
//     target: contained ≥ 50 % of uncontained). Skips, saying why, without bubblewrap or without root.
//
//   bun run bench/sandbox.ts
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { netnsMissing, SecondHost } from "../tests/support/netns.ts";
import { type Served, start, stopAll } from "./lib/mcp.ts";
import { formatMs, formatRatio, median } from "./lib/stats.ts";

const BINARY = resolve(import.meta.dir, "../dist/repl-mcp");
const PYTHON = Bun.which("python3", { PATH: "/usr/bin" }) ?? "python3";
const PLAN = { warmup: 30, blocks: 20, perBlock: 10, starts: 12, downloads: 5 };
const DOWNLOAD_BYTES = 50 * 1024 * 1024;

function missing(): string | undefined {
  if (process.platform !== "linux") return "the contained side needs Linux here";
  for (const name of ["bwrap", "socat", "rg"]) if (!Bun.which(name)) return `${name} is not installed`;
  return undefined;
}

async function cell(served: Served, code: string, reset = false): Promise<Record<string, unknown>> {
  const result = await served.call("execute_python", { code, reset });
  return result.structuredContent as Record<string, unknown>;
}

async function warm(servers: Served[]): Promise<number[][]> {
  for (const served of servers) for (let i = 0; i < PLAN.warmup; i++) await cell(served, "1+1");
  const samples: number[][] = servers.map(() => []);
  for (let block = 0; block < PLAN.blocks; block++) {
    for (const [index, served] of servers.entries()) {
      for (let i = 0; i < PLAN.perBlock; i++) {
        const started = performance.now();
        await cell(served, "1+1");
        (samples[index] as number[]).push(performance.now() - started);
      }
    }
  }
  return samples;
}

async function starts(servers: Served[]): Promise<number[][]> {
  const samples: number[][] = servers.map(() => []);
  for (let round = 0; round < PLAN.starts; round++) {
    for (const [index, served] of servers.entries()) {
      const started = performance.now();
      await cell(served, "1", true);
      (samples[index] as number[]).push(performance.now() - started);
    }
  }
  return samples;
}

/** MB/s of a cell reading the whole file with urllib, as the cell itself times it. */
async function downloads(servers: Served[], url: string): Promise<number[][]> {
  const code =
    "import time, urllib.request\n" +
    "t = time.perf_counter()\n" +
    `n = len(urllib.request.urlopen(${JSON.stringify(url)}).read())\n` +
    `assert n == ${DOWNLOAD_BYTES}, n\n` +
    "n / (time.perf_counter() - t) / 1e6";
  const samples: number[][] = servers.map(() => []);
  for (let round = 0; round < PLAN.downloads; round++) {
    for (const [index, served] of servers.entries()) {
      const result = await cell(served, code);
      (samples[index] as number[]).push(Number(result.value));
    }
  }
  return samples;
}

async function main(): Promise<void> {
  const why = missing();
  if (why) {
    console.log(`sandbox bench skipped: ${why}`);
    return;
  }
  const root = mkdtempSync(join(tmpdir(), "repl-mcp-bench-sandbox-"));
  let host: SecondHost | undefined;
  let web: ReturnType<typeof Bun.spawn> | undefined;
  try {
    const netns = netnsMissing();
    let url: string | undefined;
    if (!netns) {
      host = await SecondHost.create({ range: "198.18.0.0" });
      const www = join(root, "www");
      Bun.spawnSync(["mkdir", "-p", www]);
      writeFileSync(join(www, "big.bin"), new Uint8Array(DOWNLOAD_BYTES));
      web = Bun.spawn(
        host.wrap([PYTHON, "-m", "http.server", "8080", "--bind", host.address, "--directory", www]),
        {
          stdout: "ignore",
          stderr: "ignore",
        },
      );
      url = `http://${host.address}:8080/big.bin`;
      for (
        let i = 0;
        i < 100 &&
        !(await fetch(`http://${host.address}:8080/`)
          .then((r) => r.ok)
          .catch(() => false));
        i++
      ) {
        await Bun.sleep(50);
      }
    }
    const policy = join(root, "policy.json");
    writeFileSync(
      policy,
      JSON.stringify({ network: { allowedDomains: host ? [`${host.address}:8080`] : [] }, filesystem: {} }),
    );
    const spec = (label: string, args: string[]) => {
      const project = join(root, label);
      Bun.spawnSync(["mkdir", "-p", project]);
      return {
        label,
        command: BINARY,
        args: ["--python", PYTHON, ...args],
        env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: join(root, "home") },
        cwd: project,
      };
    };
    const plain = (await start(spec("uncontained", []))).served;
    const boxed = (await start(spec("contained", ["--sandbox", policy]))).served;
    const servers = [plain, boxed];
    const [warmPlain, warmBoxed] = (await warm(servers)).map(median) as [number, number];
    const [startPlain, startBoxed] = (await starts(servers)).map(median) as [number, number];
    console.log("sandbox: contained (--sandbox) against uncontained, same interpreter, one run");
    console.log(
      `  warm 1+1          ${formatMs(warmBoxed)} vs ${formatMs(warmPlain)}  = ${formatRatio(warmBoxed / warmPlain)} (target ≤ 1.05×)`,
    );
    console.log(
      `  worker start      ${formatMs(startBoxed)} vs ${formatMs(startPlain)}  = +${formatMs(startBoxed - startPlain)} (target ≤ +60 ms)`,
    );
    if (url) {
      const [mbPlain, mbBoxed] = (await downloads(servers, url)).map(median) as [number, number];
      console.log(
        `  50 MB download    ${mbBoxed.toFixed(0)} MB/s vs ${mbPlain.toFixed(0)} MB/s = ${formatRatio(mbBoxed / mbPlain)} (target ≥ 0.50×)`,
      );
    } else {
      console.log(`  50 MB download    skipped: ${netns}`);
    }
  } finally {
    await stopAll();
    web?.kill("SIGKILL");
    await host?.destroy();
    rmSync(root, { recursive: true, force: true });
  }
}

await main();
