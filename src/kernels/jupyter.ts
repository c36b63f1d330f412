// The one place that speaks the Jupyter Server API, through @jupyterlab/services (the client JupyterLab
// itself uses): the kernelspecs, and kernels started, attached to, executed on, interrupted, restarted and
// shut down. Two things are ours. The token travels in an Authorization header, never in a URL (a URL
// ends up in logs). And every message received is answered at once with a WebSocket pong: the Jupyter
// server's Nagle holds its next small write until our ACK, which the kernel would otherwise delay by
// 40 ms, on every round trip (docs/kernels.md, "Speed").
import {
  type Kernel,
  KernelAPI,
  KernelConnection,
  KernelMessage,
  KernelSpecAPI,
  ServerConnection,
} from "@jupyterlab/services";
import { describe, ReplError } from "../errors.ts";
import { KERNEL_MESSAGE_MAX_BYTES, KERNEL_REQUEST_TIMEOUT_MS } from "../limits.ts";
import type { KernelServer } from "./config.ts";

export interface LinkOptions {
  /** Pong after every message (default true); false is the naive client, for the bench's comparison. */
  promptAck?: boolean;
}

/** The reply of one execute_request and what its user expressions evaluated to. */
export interface Executed {
  status: "ok" | "error" | "abort";
  executionCount: number | null;
  userExpressions: Record<string, { status: string; data?: Record<string, unknown>; ename?: string }>;
}

export interface ExecuteOptions {
  silent?: boolean;
  storeHistory?: boolean;
  userExpressions?: Record<string, string>;
  allowStdin?: boolean;
  /** Every iopub message of this request (streams, displays, comm messages). */
  onIopub?: (message: { msgType: string; content: Record<string, unknown> }) => void;
  /** Answers the request's input requests (allowStdin); the answer is sent when it resolves. */
  onInput?: (prompt: string) => Promise<string>;
}

/** The kernel's execution state as its connection sees it ("idle", "busy", "restarting", "dead", ...). */
export type KernelStatus = Kernel.Status;
/** The WebSocket's state: "connecting" while it reconnects, "disconnected" once it gave up. */
export type ConnectionStatus = Kernel.ConnectionStatus;

/** One kernel reached over its WebSocket. */
export class KernelLink {
  /** Set once we close the connection ourselves: a reconnect still under way then has nothing to report. */
  private detached = false;

  constructor(private readonly kernel: Kernel.IKernelConnection) {
    // When the server restarts a kernel on its own, the services reconnect from a promise nobody awaits;
    // closing the connection meanwhile (a seat moving to a new connection) would reject it, and that
    // unhandled rejection would end this process. A reconnect that fails for any other reason still fails.
    const reconnect = kernel.reconnect.bind(kernel);
    kernel.reconnect = () =>
      reconnect().catch((error: unknown) => {
        if (!this.detached) throw error;
      });
  }

  get id(): string {
    return this.kernel.id;
  }

  /** The kernelspec it was started from. */
  get name(): string {
    return this.kernel.name;
  }

  get status(): KernelStatus {
    return this.kernel.status;
  }

  get connectionStatus(): ConnectionStatus {
    return this.kernel.connectionStatus;
  }

  /** Calls fn on every status change; returns the way to stop. */
  onStatus(fn: (status: KernelStatus) => void): () => void {
    const slot = (_: unknown, status: KernelStatus) => fn(status);
    this.kernel.statusChanged.connect(slot);
    return () => this.kernel.statusChanged.disconnect(slot);
  }

  /** Calls fn on every change of the WebSocket's state; returns the way to stop. */
  onConnection(fn: (status: ConnectionStatus) => void): () => void {
    const slot = (_: unknown, status: ConnectionStatus) => fn(status);
    this.kernel.connectionStatusChanged.connect(slot);
    return () => this.kernel.connectionStatusChanged.disconnect(slot);
  }

  /**
   * The messaging session of the kernel process behind this connection, from a fresh kernel_info reply.
   * A kernel that was restarted (by its server, another client or a reconnect that found a new process)
   * answers with a new one.
   */
  async kernelSession(): Promise<string> {
    // The shell reply alone: after a restart by another client, iopub (and so the request's "idle") may
    // never reach this connection, while shell still answers.
    const future = this.kernel.sendShellMessage(
      KernelMessage.createMessage({
        msgType: "kernel_info_request",
        channel: "shell",
        session: this.kernel.clientId,
        content: {},
      }),
      true,
      true,
    );
    const reply = await new Promise<KernelMessage.IShellMessage>((resolve, reject) => {
      future.onReply = resolve;
      future.done.catch(reject);
    });
    return reply.header.session;
  }

  /** The kernel's language and version (kernel_info_reply). */
  async info(): Promise<{ language: string; version: string; implementation: string }> {
    const info = await this.kernel.info;
    return {
      language: info.language_info.name,
      version: info.language_info.version ?? "",
      implementation: info.implementation,
    };
  }

  async execute(code: string, options: ExecuteOptions = {}): Promise<Executed> {
    const future = this.kernel.requestExecute({
      code,
      silent: options.silent ?? true,
      store_history: options.storeHistory ?? false,
      user_expressions: options.userExpressions ?? {},
      allow_stdin: options.allowStdin ?? false,
      stop_on_error: false,
    });
    this.follow(future, options);
    const reply = await future.done;
    const content = reply.content as unknown as Record<string, unknown>;
    return {
      status: content.status as Executed["status"],
      executionCount: (content.execution_count as number | undefined) ?? null,
      userExpressions: (content.user_expressions ?? {}) as Executed["userExpressions"],
    };
  }

  /** Opens a comm to a target the kernel registered (comm_open on the shell channel). */
  openComm(target: string, commId: string): void {
    const message = KernelMessage.createMessage({
      msgType: "comm_open",
      channel: "shell",
      session: this.kernel.clientId,
      content: { comm_id: commId, target_name: target, data: {} },
    });
    this.kernel.sendShellMessage(message, false, true);
  }

  /**
   * Sends a comm message (a shell request without a reply: the kernel runs its handler, then goes idle);
   * resolves once the kernel is idle again. Its iopub and stdin traffic reach `options` as for execute.
   */
  async message(commId: string, data: Record<string, unknown>, options: ExecuteOptions = {}): Promise<void> {
    const message = KernelMessage.createMessage({
      msgType: "comm_msg",
      channel: "shell",
      session: this.kernel.clientId,
      content: { comm_id: commId, data: data as never },
    });
    const future = this.kernel.sendShellMessage(message, false, true);
    this.follow(future, options);
    await future.done;
  }

  private follow(future: Pick<Kernel.IShellFuture, "onIOPub" | "onStdin">, options: ExecuteOptions): void {
    const { onIopub } = options;
    if (onIopub) {
      future.onIOPub = (message) =>
        onIopub({ msgType: message.header.msg_type, content: message.content as Record<string, unknown> });
    }
    const { onInput } = options;
    if (onInput) {
      future.onStdin = (message) => {
        if (message.header.msg_type !== "input_request") return;
        const prompt = String((message.content as { prompt?: unknown }).prompt ?? "");
        void onInput(prompt).then(
          (value) => this.kernel.sendInputReply({ status: "ok", value }, message.header as never),
          () => this.kernel.sendInputReply({ status: "ok", value: "" }, message.header as never),
        );
      };
    }
  }

  interrupt(): Promise<void> {
    return this.kernel.interrupt();
  }

  restart(): Promise<void> {
    return this.kernel.restart();
  }

  /** Stops the kernel on its server (DELETE). */
  shutdown(): Promise<void> {
    return this.kernel.shutdown();
  }

  /** Closes our connection and leaves the kernel running (an attached kernel is not ours to stop). */
  detach(): void {
    this.detached = true;
    this.kernel.dispose();
  }
}

/** One Jupyter server, with this server's token and the prompt acknowledgement. */
export class JupyterLink {
  private readonly settings: ServerConnection.ISettings;
  private readonly connections = new Set<KernelConnection>();

  constructor(
    readonly server: KernelServer,
    options: LinkOptions = {},
  ) {
    const headers: Record<string, string> = server.authorization
      ? { authorization: server.authorization }
      : {};
    const promptAck = options.promptAck ?? true;
    // The services' own socket class, given our header; Bun's WebSocket takes headers as an option.
    class AuthorizedSocket extends WebSocket {
      constructor(url: string | URL, protocols?: string | string[]) {
        super(url, { protocols, headers } as unknown as string[]);
        if (promptAck) this.addEventListener("message", () => (this as unknown as { pong(): void }).pong());
      }

      // A message over the bound is dropped before the services parse it. Ours (one frame each) are
      // far smaller; a bigger one is another client's output on a shared kernel's broadcast channel.
      override set onmessage(handler: ((event: MessageEvent) => void) | null) {
        super.onmessage = handler
          ? (event: MessageEvent) => {
              if (messageBytes(event.data) > KERNEL_MESSAGE_MAX_BYTES) return;
              handler(event);
            }
          : null;
      }
    }
    const base = server.url;
    const { ca } = server;
    const startMs = server.startTimeoutMs;
    this.settings = ServerConnection.makeSettings({
      baseUrl: base,
      wsUrl: base.replace(/^http/, "ws"),
      // REST requests get "Authorization: token …" from the services; the socket from AuthorizedSocket.
      appendToken: false,
      token: server.authorization?.replace(/^token /, "") ?? "",
      // Every request has a deadline (a kernel start the entry's own), and a redirect (a hub's login
      // page) is an answer to report, not a page to follow.
      fetch: (request: Request) => {
        const starting =
          request.method === "POST" && /\/api\/kernels\/?$/.test(new URL(request.url).pathname);
        const init = {
          redirect: "manual",
          signal: AbortSignal.timeout(starting ? startMs : KERNEL_REQUEST_TIMEOUT_MS),
          ...(ca ? { tls: { ca } } : {}),
        };
        return fetch(request, init as RequestInit);
      },
      WebSocket: AuthorizedSocket as unknown as typeof WebSocket,
    });
  }

  /** Whether a kernel of that id runs there now (undefined: it does not). */
  async running(id: string): Promise<Kernel.IModel | undefined> {
    return await KernelAPI.getKernelModel(id, this.settings);
  }

  /** Stops a kernel by id (DELETE), whether or not we are connected to it; a kernel already gone is fine. */
  async shutdown(id: string): Promise<void> {
    try {
      await KernelAPI.shutdownKernel(id, this.settings);
    } catch (error) {
      if (statusOf(error) !== 404) throw error;
    }
  }

  /** The kernelspecs the server offers (with their language) and its default. */
  async specs(): Promise<{ default: string; specs: Record<string, { language: string }> }> {
    const answer = await KernelSpecAPI.getSpecs(this.settings);
    const specs: Record<string, { language: string }> = {};
    for (const [name, spec] of Object.entries(answer.kernelspecs))
      specs[name] = { language: spec?.language ?? "" };
    return { default: answer.default, specs };
  }

  /** Starts a kernel of `name` (else the entry's, else the server's default). */
  async start(name?: string): Promise<KernelLink> {
    const wanted = name ?? this.server.kernel;
    const model = await KernelAPI.startNew(wanted ? { name: wanted } : {}, this.settings);
    return this.connect(model);
  }

  /** Connects to a kernel already running there (a notebook's, for instance). */
  async attach(id: string): Promise<KernelLink> {
    const model = await KernelAPI.getKernelModel(id, this.settings);
    if (!model) throw new Error(`no kernel ${id} on ${this.server.name}`);
    return this.connect(model);
  }

  /** Closes every connection of this link; kernels keep running unless shut down. */
  dispose(): void {
    for (const connection of this.connections) connection.dispose();
    this.connections.clear();
  }

  /** Connects to the kernel a model describes. No KernelManager: it would poll the server's kernel list. */
  connect(model: Kernel.IModel): KernelLink {
    const connection = new KernelConnection({ model, serverSettings: this.settings, handleComms: false });
    this.connections.add(connection);
    connection.disposed.connect(() => this.connections.delete(connection));
    return new KernelLink(connection);
  }
}

function messageBytes(data: unknown): number {
  if (typeof data === "string") return data.length * 3;
  if (data instanceof ArrayBuffer) return data.byteLength;
  return ArrayBuffer.isView(data) ? data.byteLength : 0;
}

function statusOf(error: unknown): number | undefined {
  const response = (error as { response?: { status?: unknown } } | undefined)?.response;
  return typeof response?.status === "number" ? response.status : undefined;
}

/**
 * What went wrong talking to a kernel server, as an error an agent can act on: which server, what we
 * were doing, what it answered, what to do. Never the token.
 */
export function serverFailure(server: KernelServer, doing: string, error: unknown): ReplError {
  if (error instanceof ReplError) return error;
  const where = `Kernel server "${server.name}" (${server.url})`;
  const status = statusOf(error);
  const fail = (message: string) => new ReplError("KERNEL_SERVER_FAILED", message, { cause: error });
  if (status === 401 || status === 403) {
    return fail(
      `${where} refused the token while ${doing} (HTTP ${status}); check the entry's token or tokenFile`,
    );
  }
  if (status !== undefined && status >= 300 && status < 400) {
    return fail(
      `${where} redirected while ${doing} (HTTP ${status}), as to a login page; check the token and that the url is the user server (…/user/<name>/)`,
    );
  }
  if (status === 404) {
    return fail(`${where} answered 404 while ${doing}; check that the url is a Jupyter server's base URL`);
  }
  if (status !== undefined) {
    return fail(`${where} failed while ${doing} (HTTP ${status}: ${describe(error).slice(0, 300)})`);
  }
  const name = (error as { name?: unknown } | undefined)?.name;
  if (name === "TimeoutError" || name === "AbortError" || /timed out/i.test(describe(error))) {
    return fail(
      `${where} did not answer in time while ${doing}; check that it runs, or raise startTimeoutS for slow kernel starts`,
    );
  }
  if (error instanceof SyntaxError || /validation|JSON/i.test(describe(error))) {
    return fail(`${where} answered something that is not the Jupyter API while ${doing}; check the url`);
  }
  return fail(
    `${where} could not be reached while ${doing} (${describe(error).slice(0, 300)}); check that it runs and the url`,
  );
}
