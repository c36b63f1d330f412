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
  KernelSpecAPI,
  ServerConnection,
} from "@jupyterlab/services";
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

/** One kernel reached over its WebSocket. */
export class KernelLink {
  constructor(private readonly kernel: Kernel.IKernelConnection) {}

  get id(): string {
    return this.kernel.id;
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
    const reply = await future.done;
    const content = reply.content as unknown as Record<string, unknown>;
    return {
      status: content.status as Executed["status"],
      executionCount: (content.execution_count as number | undefined) ?? null,
      userExpressions: (content.user_expressions ?? {}) as Executed["userExpressions"],
    };
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
    }
    const base = server.url;
    const { ca } = server;
    this.settings = ServerConnection.makeSettings({
      baseUrl: base,
      wsUrl: base.replace(/^http/, "ws"),
      // REST requests get "Authorization: token …" from the services; the socket from AuthorizedSocket.
      appendToken: false,
      token: server.authorization?.replace(/^token /, "") ?? "",
      ...(ca ? { fetch: (request: Request) => fetch(request, { tls: { ca } } as RequestInit) } : {}),
      WebSocket: AuthorizedSocket as unknown as typeof WebSocket,
    });
  }

  /** The kernelspecs the server offers and its default. */
  async specs(): Promise<{ default: string; names: string[] }> {
    const specs = await KernelSpecAPI.getSpecs(this.settings);
    return { default: specs.default, names: Object.keys(specs.kernelspecs) };
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

  // No KernelManager: it would poll the server's kernel list for as long as it lives.
  private connect(model: Kernel.IModel): KernelLink {
    const connection = new KernelConnection({ model, serverSettings: this.settings, handleComms: false });
    this.connections.add(connection);
    connection.disposed.connect(() => this.connections.delete(connection));
    return new KernelLink(connection);
  }
}
