// release/Dockerfile built with podman and run the way docs/http.md tells users to: host networking, a
// 0600 token file mounted read-only, the image's own entrypoint. An SDK client runs cells over Streamable
// HTTP with the token and is refused without it; the server runs as the image's non-root user; `podman
// stop` ends it by SIGTERM within the grace period and leaves no process of it on the host.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import {
  chmodSync,
  chownSync,
  copyFileSync,
  mkdirSync,
  readFileSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { BINARY, pidAlive, taggedPids, waitFor } from "../support/harness.ts";
import { HttpClient, INITIALIZE, post } from "../support/http.ts";
import { Podman, podmanUnavailable } from "./podman.ts";
import { makeTempDir, ROOT, removeTree, VERSION } from "./support.ts";

const UNAVAILABLE = podmanUnavailable();
if (UNAVAILABLE) console.warn(`skipped: the container image test, because ${UNAVAILABLE}`);

const BASE = "localhost/repl-mcp-test-base:bookworm";
const IMAGE = "localhost/repl-mcp-test:latest";
/** The user the Dockerfile creates and runs as. */
const IMAGE_UID = 10001;
/** Seconds `podman stop` waits for SIGTERM to work before it sends SIGKILL. */
const STOP_GRACE_S = 10;

let podman: Podman;
let dir = "";

beforeAll(async () => {
  if (UNAVAILABLE) return;
  podman = new Podman();
  dir = makeTempDir("repl-mcp-container-");
  await podman.importBase(BASE);
  // The build context: the Dockerfile and a binary of this checkout, as REPL_MCP_FROM=local expects.
  const context = join(dir, "context");
  mkdirSync(context);
  copyFileSync(join(ROOT, "release", "Dockerfile"), join(context, "Dockerfile"));
  copyFileSync(BINARY, join(context, "repl-mcp"));
  await podman.podman(
    [
      "build",
      "--pull=never",
      "--network=host",
      "--tag",
      IMAGE,
      "--build-arg",
      `PYTHON_IMAGE=${BASE}`,
      "--build-arg",
      "REPL_MCP_FROM=local",
      "--build-arg",
      `REPL_MCP_VERSION=${VERSION}`,
      context,
    ],
    300_000,
  );
}, 1_200_000);

afterAll(async () => {
  if (UNAVAILABLE) return;
  await podman?.close();
  if (dir) removeTree(dir);
}, 180_000);

/** The URL the server printed on stderr (it listens on a free port: other tests share the host's network). */
async function serverUrl(name: string): Promise<string> {
  let url = "";
  await waitFor(
    async () => {
      const match = /serving MCP over HTTP at http:\/\/[^:]+:(\d+)\/mcp/.exec(await podman.logs(name));
      if (match) url = `http://127.0.0.1:${match[1]}/mcp`;
      return url !== "";
    },
    { timeoutMs: 30_000, intervalMs: 200, what: "the server's URL line in podman logs" },
  );
  return url;
}

interface Started {
  name: string;
  tag: string;
  url: string;
}

/** `podman run` of the image with the given options and arguments, on a free port of the host network. */
async function start(options: string[], args: string[]): Promise<Started> {
  const name = `repl-mcp-test-${crypto.randomUUID().slice(0, 8)}`;
  const tag = crypto.randomUUID(); // to find the container's processes in the host's process table
  await podman.podman([
    "run",
    "--detach",
    "--name",
    name,
    "--network=host",
    "--env",
    `REPL_MCP_TEST_TAG=${tag}`,
    ...options,
    IMAGE,
    ...args,
    "--port",
    "0",
  ]);
  return { name, tag, url: await serverUrl(name) };
}

/**
 * Refused without the token; with it, cells keep their state and run as the image's user in /work, which
 * is the host directory `work`.
 */
async function expectServes({ url, tag }: Started, token: string, work: string): Promise<void> {
  const stranger = new HttpClient(url, {}, "legacy");
  await expect(stranger.client.connect(stranger.transport)).rejects.toThrow(/Missing or wrong bearer token/);
  expect((await post(url, INITIALIZE)).status).toBe(401);
  const wrong = { authorization: "Bearer wrong-token-0123456789" };
  expect((await post(url, INITIALIZE, wrong)).status).toBe(401);

  const client = new HttpClient(url, { authorization: `Bearer ${token}` }, "legacy");
  await client.client.connect(client.transport);
  try {
    expect(client.client.getServerVersion()?.version).toBe(VERSION);
    const first = await client.run(
      "import os, sys\nstate = 41\n[os.getuid(), os.getcwd(), sys.version_info >= (3, 10)]",
    );
    expect([first.success, first.error]).toEqual([true, null]);
    expect(first.value).toEqual([IMAGE_UID, "/work", true]);
    expect((await client.run("state + 1")).value).toBe(42);
    // What cells write into /work lands in the mounted directory, owned by the image's user.
    expect((await client.run("open('from-a-cell.txt', 'w').write('hello')")).value).toBe(5);
    expect(readFileSync(join(work, "from-a-cell.txt"), "utf8")).toBe("hello");
    expect(statSync(join(work, "from-a-cell.txt")).uid).toBe(IMAGE_UID);

    // Every process of the container (server, guardian, worker) runs as the image's user on the host.
    const pids = taggedPids(tag);
    expect(pids.length).toBeGreaterThanOrEqual(3);
    for (const pid of pids) {
      const uid = /^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1];
      expect(Number(uid)).toBe(IMAGE_UID);
    }
  } finally {
    await client.client.close();
  }
}

/** `podman stop` ends the server by SIGTERM within the grace period, and nothing of it stays. */
async function expectStopsCleanly({ name, tag }: Started): Promise<void> {
  const inspect = async (format: string) =>
    (await podman.podman(["inspect", "--format", format, name])).trim();
  const conmon = Number(await inspect("{{.State.ConmonPid}}"));
  expect(pidAlive(conmon)).toBe(true);
  await podman.podman(["stop", "--time", String(STOP_GRACE_S), name], (STOP_GRACE_S + 60) * 1000);
  // Exit status 0: the server ended on SIGTERM by itself; a SIGKILL after the grace period gives 137.
  expect(await inspect("{{.State.Status}} {{.State.ExitCode}}")).toBe("exited 0");
  await waitFor(() => taggedPids(tag).length === 0 && !pidAlive(conmon), {
    timeoutMs: 10_000,
    what: "the container's processes and its conmon to be gone",
  });
  await podman.podman(["rm", name]);
}

const newToken = () => Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("hex");

describe.skipIf(UNAVAILABLE !== undefined)("the container image", () => {
  test("as docs/http.md runs it: a 0600 token file, a data directory, the image's own command", async () => {
    const token = newToken();
    const tokenFile = join(dir, "token");
    writeFileSync(tokenFile, token, { mode: 0o600 });
    chmodSync(tokenFile, 0o600);
    chownSync(tokenFile, IMAGE_UID, IMAGE_UID); // the server refuses a token file others can read
    const data = join(dir, "data");
    mkdirSync(data, { mode: 0o700 });
    chownSync(data, IMAGE_UID, IMAGE_UID);
    const started = await start(
      ["--volume", `${tokenFile}:/run/secrets/repl-mcp-token:ro`, "--volume", `${data}:/work`],
      ["--auth-token-file", "/run/secrets/repl-mcp-token"],
    );
    await expectServes(started, token, data);
    await expectStopsCleanly(started);
  }, 180_000);

  test("as the Kubernetes manifest runs it: the token from the environment, no capabilities, no privilege gain", async () => {
    const token = newToken();
    // Kubernetes makes an emptyDir volume a new, empty, world-writable directory.
    const work = join(dir, "empty-dir");
    mkdirSync(work);
    chmodSync(work, 0o777);
    // The container part of the Deployment in docs/http.md: its args replace the image's command.
    const started = await start(
      [
        "--env",
        `REPL_MCP_HTTP_TOKEN=${token}`,
        "--user",
        `${IMAGE_UID}:${IMAGE_UID}`,
        "--cap-drop=all",
        "--security-opt=no-new-privileges",
        "--volume",
        `${work}:/work`,
      ],
      ["--idle-timeout-s", "1800"],
    );
    await expectServes(started, token, work);
    await expectStopsCleanly(started);
  }, 180_000);
});
