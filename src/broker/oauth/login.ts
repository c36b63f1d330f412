// `repl-mcp --config REG --oauth-login NAME`: this broker's own authorization-code grant for one HTTP
// entry. The SDK does the protocol (metadata discovery, dynamic registration or the preregistered
// client, PKCE S256, state, the code exchange with resource=<server url>); this file supplies the
// loopback callback, checks state and iss before any token request, and writes the credential file.
import { randomBytes } from "node:crypto";
import type { OAuthClientInformationMixed, OAuthTokens } from "@modelcontextprotocol/client";
import {
  auth,
  type OAuthClientInformationContext,
  type OAuthClientProvider,
  type OAuthDiscoveryState,
  selectClientAuthMethod,
} from "@modelcontextprotocol/client";
import { ReplError } from "../../errors.ts";
import { lockExclusive, lockPathFor } from "../../fs/lock.ts";
import { OAUTH_CALLBACK_WAIT_MS, OAUTH_REFRESH_LOCK_WAIT_MS } from "../../limits.ts";
import { NAME, VERSION } from "../../version.ts";
import type { HttpEntry, ServerEntry } from "../config.ts";
import { type Callback, listenForCallback } from "./callback.ts";
import { loginChallenge } from "./challenge.ts";
import { type CredentialFile, ensureCredentialDirectory, writeCredentialFile } from "./credential-file.ts";
import { oauthFetch, type TokenCapture } from "./oauth-fetch.ts";
import { resourceFor } from "./resource.ts";
import { oauthFailure } from "./safe-error.ts";

export const LOGIN_PROMPT = "Open this authorization URL in your browser to grant this broker access:";

const fail = (message: string) => new ReplError("OAUTH_FAILED", message);

/** Everything one login remembers between the authorization request and the code exchange. */
class LoginProvider implements OAuthClientProvider {
  client: OAuthClientInformationMixed | undefined;
  tokens_: OAuthTokens | undefined;
  discovery: OAuthDiscoveryState | undefined;
  authorizationUrl: URL | undefined;
  private verifier: string | undefined;
  readonly validateResourceURL: (serverUrl: string | URL, resource?: string) => Promise<URL>;

  constructor(
    private readonly spec: HttpEntry,
    readonly redirectUrl: string,
    readonly expectedState: string,
    private readonly announce: (url: URL) => void,
  ) {
    const { clientId, clientSecret } = spec.oauth ?? {};
    if (clientId)
      this.client = { client_id: clientId, ...(clientSecret ? { client_secret: clientSecret } : {}) };
    this.validateResourceURL = resourceFor(spec.url);
  }

  get clientMetadata() {
    const scopes = this.spec.oauth?.scopes ?? [];
    return {
      client_name: `${NAME} broker`,
      software_id: NAME,
      software_version: VERSION,
      redirect_uris: [this.redirectUrl],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
      ...(scopes.length ? { scope: scopes.join(" ") } : {}),
    };
  }
  state() {
    return this.expectedState;
  }
  // The client (registered now, or preregistered in the registry) belongs to the authorization server
  // this login discovered: the SDK checks that stamp (SEP-2352) before it uses the client.
  clientInformation(ctx?: OAuthClientInformationContext) {
    return this.client && ctx ? { ...this.client, issuer: ctx.issuer } : this.client;
  }
  saveClientInformation(client: OAuthClientInformationMixed) {
    this.client = client;
  }
  tokens() {
    // A login always asks for a new grant, whatever is stored.
    return undefined;
  }
  saveTokens(tokens: OAuthTokens) {
    this.tokens_ = tokens;
  }
  redirectToAuthorization(url: URL) {
    this.authorizationUrl = url;
    this.announce(url);
  }
  saveCodeVerifier(verifier: string) {
    this.verifier = verifier;
  }
  codeVerifier() {
    if (!this.verifier) throw fail("OAuth login lost its PKCE verifier");
    return this.verifier;
  }
  saveDiscoveryState(state: OAuthDiscoveryState) {
    this.discovery = state;
  }
  discoveryState() {
    return this.discovery;
  }
}

export function loginEntry(entry: ServerEntry | undefined): HttpEntry {
  const spec = entry?.transport;
  if (spec?.type !== "http" || !spec.oauth) {
    throw fail("--oauth-login needs an HTTP registry entry with an oauth section");
  }
  if ((spec.oauth.grantType ?? "authorization_code") !== "authorization_code" || !spec.oauth.credentialFile) {
    throw fail("--oauth-login needs oauth.grantType authorization_code and an oauth.credentialFile");
  }
  return spec;
}

/**
 * Why a callback must be refused before any token request, or null when it may be exchanged. Its state
 * is already this login's: the listener ignores every other callback.
 */
function refusal(callback: Callback, provider: LoginProvider): string | null {
  const params = callback.params;
  const error = params.get("error");
  if (error) {
    const code = /^[a-z_]{1,64}$/.test(error) ? error : "an error";
    return `The authorization server returned ${code} instead of a code`;
  }
  const metadata = provider.discovery?.authorizationServerMetadata;
  const iss = params.get("iss");
  // RFC 9207: a server that announces iss must send it, and it must be the issuer discovery found.
  const announcesIss =
    (metadata as { authorization_response_iss_parameter_supported?: unknown } | undefined)
      ?.authorization_response_iss_parameter_supported === true;
  if (iss !== null ? iss !== metadata?.issuer : announcesIss) {
    return "The callback's iss does not name the authorization server this login used";
  }
  if (!params.get("code")) return "The callback carries no authorization code";
  return null;
}

/**
 * Runs the whole login; resolves once the credential file is saved. `announce` receives the two
 * lines to show the user (the prompt, then the URL alone).
 */
export async function oauthLogin(entry: ServerEntry | undefined, announce: (lines: string[]) => void) {
  const spec = loginEntry(entry);
  const path = spec.oauth?.credentialFile as string;
  ensureCredentialDirectory(path);
  const state = randomBytes(32).toString("base64url");
  const listener = listenForCallback(spec.oauth?.redirectPort ?? 0, state, (count) =>
    announce([
      `Ignored a callback whose state is not this login's (${count} so far); still waiting for the browser`,
    ]),
  );
  try {
    const capture: TokenCapture = {};
    const fetchFn = oauthFetch(capture);
    const provider = new LoginProvider(spec, listener.redirectUri, state, (url) =>
      announce([LOGIN_PROMPT, url.href]),
    );
    const hint = await loginChallenge(spec.url, fetchFn);
    const scope = spec.oauth?.scopes?.length ? spec.oauth.scopes.join(" ") : hint.scope;
    const options = { serverUrl: spec.url, scope, resourceMetadataUrl: hint.resourceMetadataUrl, fetchFn };
    const secrets = [spec.oauth?.clientSecret];
    const again = "check the registry entry and the server, then run --oauth-login again";
    try {
      await auth(provider, options);
    } catch (error) {
      throw oauthFailure("OAuth discovery or client registration failed", error, again, secrets);
    }
    if (!provider.authorizationUrl) throw fail("OAuth login did not produce an authorization URL");

    const callback = await listener.next(Date.now() + OAUTH_CALLBACK_WAIT_MS);
    const refused = refusal(callback, provider);
    if (refused) {
      callback.answer(false);
      throw fail(`${refused}; nothing was exchanged or saved. Run --oauth-login again`);
    }
    const code = callback.params.get("code") as string;
    // The SDK checks iss again (RFC 9207) when it is given; refusal() already compared it with discovery.
    const iss = callback.params.get("iss") ?? undefined;
    try {
      await auth(provider, { ...options, authorizationCode: code, ...(iss === undefined ? {} : { iss }) });
      await saveUnderLock(path, () => save(path, spec, provider, capture, listener.redirectUri));
    } catch (error) {
      callback.answer(false);
      throw oauthFailure("OAuth code exchange failed", error, again, [...secrets, code]);
    }
    callback.answer(true);
  } finally {
    await listener.stop();
  }
}

async function saveUnderLock(path: string, write: () => Promise<void>): Promise<void> {
  const lock = await lockExclusive(lockPathFor(path), "OAuth credential file", OAUTH_REFRESH_LOCK_WAIT_MS);
  if (!lock) throw fail("Another repl-mcp holds this credential file's lock; try again in a moment");
  try {
    await write();
  } finally {
    lock.release();
  }
}

function save(
  path: string,
  spec: HttpEntry,
  provider: LoginProvider,
  capture: TokenCapture,
  redirectUri: string,
) {
  const client = provider.client;
  const discovery = provider.discovery;
  if (!client || !discovery || !provider.tokens_ || !capture.response) {
    throw fail("The token endpoint's answer could not be read");
  }
  const metadata = discovery.authorizationServerMetadata;
  const issuer = metadata?.issuer ?? String(discovery.authorizationServerUrl);
  return writeCredentialFile(path, {
    server_url: spec.url,
    client: {
      client_id: client.client_id,
      ...(client.client_secret ? { client_secret: client.client_secret } : {}),
      issuer,
      token_endpoint: metadata?.token_endpoint ?? new URL("/token", discovery.authorizationServerUrl).href,
      token_endpoint_auth_method: selectClientAuthMethod(
        client,
        metadata?.token_endpoint_auth_methods_supported ?? [],
      ),
      redirect_uri: redirectUri,
    },
    token_received_at: capture.receivedAt ?? Math.floor(Date.now() / 1000),
    token_response: capture.response as CredentialFile["token_response"],
  });
}
