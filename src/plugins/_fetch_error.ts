/**
 * Short, URL-free reasons for failed `fetch` calls, shared by the built-in
 * plugins.
 *
 * @module
 */

/** Messages of an error and its causes, outermost first. */
function messages(error: unknown): string[] {
  const out: string[] = [];
  let current: unknown = error;
  for (let depth = 0; current !== undefined && current !== null && depth < 5; depth++) {
    out.push(current instanceof Error ? current.message : String(current));
    current = current instanceof Error ? current.cause : undefined;
  }
  return out;
}

/**
 * Why a request to `url` failed, e.g. `connection refused` or `DNS lookup
 * failed`. The URL (which may carry credentials in its query) is never included.
 */
export function describeFetchError(error: unknown, url: URL): string {
  const all = messages(error).join(" | ");
  // Messages of fetch (hyper) and of node:http (error codes) alike.
  if (
    /dns error|failed to lookup|dns lookup|name or service not known|no such host|ENOTFOUND|EAI_AGAIN/i
      .test(all)
  ) {
    return "DNS lookup failed";
  }
  if (/connection refused|ECONNREFUSED/i.test(all)) return "connection refused";
  if (/connection reset|ECONNRESET/i.test(all)) return "connection reset";
  if (/connection closed|unexpected eof|incomplete message|socket hang up/i.test(all)) {
    return "connection closed by the server";
  }
  if (/timed out|ETIMEDOUT/i.test(all)) return "connection timed out";
  if (/certificate|tls|ssl|handshake|CERT_/i.test(all)) return "TLS handshake failed";
  const innermost = messages(error).at(-1) ?? "request failed";
  return innermost
    .replaceAll(url.href, url.host)
    .replace(/^error sending request for url \([^)]*\):\s*/, "")
    .replace(/\s+/g, " ");
}
