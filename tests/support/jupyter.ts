// A real Jupyter Server (Debian's python3-jupyter-server with python3-ipykernel) on loopback (or on a
// second host, tests/support/netns.ts), with token auth, started by a test and stopped with everything it
// started. Tests that need it skip, saying why, where it is not installed.
import { readdirSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import type { KernelServer } from "../../src/kernels/config.ts";
import { tempDir, waitFor } from "./harness.ts";
import type { SecondHost } from "./netns.ts";

const SYSTEM_PYTHON = "/usr/bin/python3";

/**
 * jupyter_server 1.x imports the notebook package where it is installed (to check the contents manager
 * class), which imports distutils; setuptools' stand-in for distutils loads all of setuptools, a fifth of
 * the server's start in CPU. The standard library's distutils serves it as well.
 */
export const LEAN_START = { SETUPTOOLS_USE_DISTUTILS: "stdlib" };

/** Why a Jupyter Server cannot run here, or undefined. */
export function jupyterMissing(): string | undefined {
  const probe = Bun.spawnSync([SYSTEM_PYTHON, "-c", "import jupyter_server, ipykernel"], {
    env: { PATH: "/usr/bin:/bin" },
    stderr: "pipe",
  });
  return probe.exitCode === 0
    ? undefined
    : `${SYSTEM_PYTHON} cannot import jupyter_server and ipykernel (install python3-jupyter-server and python3-ipykernel)`;
}

async function freePort(): Promise<number> {
  return await new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

export class JupyterServer {
  private constructor(
    readonly url: string,
    readonly token: string,
    private readonly proc: Bun.Subprocess,
    private readonly dir: string,
    /** The second host it runs on, if not this one. */
    readonly host?: SecondHost,
  ) {}

  /**
   * Starts one with a fresh token and root directory (or those of a server that was stopped with
   * `crash`, on its port and host: the same server coming back); resolves once its API answers.
   */
  static async start(again?: JupyterServer): Promise<JupyterServer> {
    return await JupyterServer.launch(again?.host, again);
  }

  /**
   * Starts one inside `host`'s network namespace, listening on its address only: `url` is
   * `http://<host.address>:<port>/`, reachable from here over the veth, not on this host's loopback.
   */
  static async startOn(host: SecondHost): Promise<JupyterServer> {
    return await JupyterServer.launch(host);
  }

  private static async launch(host?: SecondHost, again?: JupyterServer): Promise<JupyterServer> {
    // In a fresh namespace any port is free; one free here too keeps 127.0.0.1:<port> a closed door.
    const port = again ? Number(new URL(again.url).port) : await freePort();
    const address = host?.address ?? "127.0.0.1";
    const token = again?.token ?? crypto.randomUUID().replaceAll("-", "");
    const dir = again?.dir ?? tempDir("repl-mcp-jupyter-");
    const command = [
      SYSTEM_PYTHON,
      "-m",
      "jupyter_server",
      "--allow-root",
      "--no-browser",
      `--ServerApp.ip=${address}`,
      `--ServerApp.port=${port}`,
      "--ServerApp.port_retries=0",
      `--ServerApp.token=${token}`,
      `--ServerApp.root_dir=${dir}`,
    ];
    const proc = Bun.spawn(host ? host.wrap(command) : command, {
      cwd: dir,
      // Its own home and runtime directory: nothing of the machine's Jupyter configuration applies.
      env: { PATH: "/usr/bin:/bin", HOME: dir, JUPYTER_RUNTIME_DIR: join(dir, "runtime"), ...LEAN_START },
      stdout: "ignore",
      stderr: "ignore",
    });
    const server = new JupyterServer(`http://${address}:${port}/`, token, proc, dir, host);
    try {
      await waitFor(
        async () =>
          (
            await fetch(`${server.url}api/kernelspecs`, {
              headers: { authorization: `token ${token}` },
            }).catch(() => undefined)
          )?.ok === true,
        { timeoutMs: 30_000, intervalMs: 100, what: "the Jupyter Server to answer" },
      );
    } catch (error) {
      await server.stop();
      throw error;
    }
    return server;
  }

  /** This server as a checked entry of a kernel servers file would be (`token`: another one to try). */
  entry(name = "test", token = this.token): KernelServer {
    return {
      name,
      url: this.url,
      authorization: `token ${token}`,
      kernel: undefined,
      ca: undefined,
      startTimeoutMs: 60_000,
      allowReset: false,
      insecure: false,
    };
  }

  /** The root directory it serves (its kernels' default working directory). */
  get root(): string {
    return this.dir;
  }

  /** The ids of the kernels it runs now. */
  async kernels(): Promise<string[]> {
    const response = await fetch(`${this.url}api/kernels`, {
      headers: { authorization: `token ${this.token}` },
    });
    return ((await response.json()) as { id: string }[]).map((kernel) => kernel.id);
  }

  /** Restarts a kernel through the REST API, as another client (JupyterLab's "Restart Kernel") does. */
  async restartKernel(id: string): Promise<void> {
    const response = await fetch(`${this.url}api/kernels/${id}/restart`, {
      method: "POST",
      headers: { authorization: `token ${this.token}` },
    });
    if (!response.ok)
      throw new Error(`restarting kernel ${id}: HTTP ${response.status} ${await response.text()}`);
  }

  /** Stops it as `stop` does; resolves with the kernels it still ran (our tests expect none). */
  async stopListing(): Promise<string[]> {
    try {
      return await this.kernels();
    } finally {
      await this.stop();
    }
  }

  /** Kills it at once (SIGKILL), keeping its directory for a `start(this)`; its kernels die with it. */
  async crash(): Promise<void> {
    this.proc.kill("SIGKILL");
    await this.proc.exited;
    // Its kernels notice that their parent died only when init adopts them; under the test runner (a
    // child subreaper) they would not, so they go the way they would go on a real host.
    const marker = `${join(this.dir, "runtime")}/kernel-`;
    for (const entry of readdirSync("/proc")) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        if (readFileSync(`/proc/${entry}/cmdline`, "latin1").includes(marker))
          process.kill(Number(entry), "SIGKILL");
      } catch {
        // gone meanwhile
      }
    }
  }

  /** Stops it (its kernels with it) and removes its directory. */
  async stop(): Promise<void> {
    this.proc.kill("SIGTERM");
    const exited = await Promise.race([this.proc.exited, Bun.sleep(10_000).then(() => undefined)]);
    if (exited === undefined) this.proc.kill("SIGKILL");
    await this.proc.exited;
    rmSync(this.dir, { recursive: true, force: true });
  }
}
