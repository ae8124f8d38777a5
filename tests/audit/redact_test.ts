import { assert, assertEquals, assertThrows } from "../_asserts.ts";
import {
  compileRedactPatterns,
  createAuditLog,
  createRedactor,
  isSecretKey,
  redact,
  REDACTED,
} from "../../src/audit/mod.ts";
import { parseConfigFile } from "../../src/config/mod.ts";
import type { GatewayError } from "../../src/errors/mod.ts";
import { readRaw, tempStore } from "./_store.ts";

/** 36 common names of secrets, in the spellings APIs use. */
const SECRET_NAMES = [
  "token",
  "access_token",
  "refresh_token",
  "id_token",
  "secret",
  "client_secret",
  "password",
  "passwd",
  "pwd",
  "pass",
  "passphrase",
  "Authorization",
  "auth",
  "bearer",
  "api_key",
  "apikey",
  "X-Api-Key",
  "Cookie",
  "Set-Cookie",
  "session",
  "session_id",
  "sessionid",
  "private_key",
  "credentials",
  "jwt",
  "signature",
  "sig",
  "otp",
  "pin",
  "ssn",
  "card_number",
  "cvv",
  "webhook_secret",
  "connection_string",
  "dsn",
  "aws_secret_access_key",
];

/** Other spellings of the same: case, camelCase, concatenated, prefixed. */
const SECRET_SPELLINGS = [
  "PASSWD",
  "accessToken",
  "AccessToken",
  "accesstoken",
  "clientSecret",
  "sessionId",
  "sessionID",
  "xApiKey",
  "APIKey",
  "GITHUB_TOKEN",
  "SLACK_BOT_TOKEN",
  "PGPASSWORD",
  "db.password",
  "Proxy-Authorization",
  "X-Hub-Signature-256",
  "X-Amz-Credential",
  "oauth_token",
  "secretKey",
  "creditCardNumber",
  "cc_number",
  "cookies",
];

/** Keys that look like secrets but are not: counts, descriptions, look-alike words. */
const HARMLESS_NAMES = [
  "author",
  "authors",
  "pagination",
  "tokens_used",
  "max_tokens",
  "input_tokens",
  "token_count",
  "tokenizer",
  "token_type",
  "auth_url",
  "token_endpoint",
  "secret_name",
  "password_policy",
  "key",
  "keyboard",
  "monkey",
  "passenger",
  "compass",
  "bypass",
  "spin",
  "pinned",
  "opinion",
  "design",
  "assign",
  "signed_at",
  "description",
  "session_count",
  "cc",
  "channel",
  "text",
  "url",
];

Deno.test("isSecretKey() catches 36 common secret names and their other spellings", () => {
  assertEquals(SECRET_NAMES.length, 36);
  for (const key of [...SECRET_NAMES, ...SECRET_SPELLINGS]) {
    assert(isSecretKey(key), `${key} should be secret`);
  }
});

Deno.test("isSecretKey() leaves harmless look-alikes alone (token counts, author, cc, …)", () => {
  for (const key of HARMLESS_NAMES) assert(!isSecretKey(key), `${key} should not be secret`);
});

Deno.test("redact() replaces the values of every secret key and keeps harmless ones", () => {
  const input = Object.fromEntries(
    [...SECRET_NAMES, ...SECRET_SPELLINGS, ...HARMLESS_NAMES].map((key) => [key, "value-1"]),
  );
  const redacted = redact(input) as Record<string, unknown>;
  for (const key of [...SECRET_NAMES, ...SECRET_SPELLINGS]) assertEquals(redacted[key], REDACTED);
  for (const key of HARMLESS_NAMES) assertEquals(redacted[key], "value-1");
});

Deno.test("redact() keeps a secret key's null, empty and boolean values, and redacts numbers", () => {
  assertEquals(
    redact({ token: null, password: "", pin: 1234, session: true, secret: { a: 1 }, otp: [1] }),
    { token: null, password: "", pin: REDACTED, session: true, secret: REDACTED, otp: REDACTED },
  );
});

Deno.test("redact() reaches into nested objects and arrays and keeps other values", () => {
  const input = {
    channel: "#ops",
    headers: { Authorization: "Bearer x", accept: "json" },
    items: [{ name: "a", secret: { nested: true } }, 3, "plain"],
  };
  assertEquals(redact(input), {
    channel: "#ops",
    headers: { Authorization: REDACTED, accept: "json" },
    items: [{ name: "a", secret: REDACTED }, 3, "plain"],
  });
  assertEquals(input.headers.Authorization, "Bearer x", "the input is not modified");
});

// Fake secrets of each format, assembled so that no literal looks like a real key.
const JWT = "eyJhbGciOiJIUzI1NiJ9" + "." + "eyJzdWIiOiIxMjM0NTY3ODkwIn0" + "." +
  "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";
const AWS = "AKIA" + "IOSFODNN7EXAMPLE";
const GITHUB = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8";
const GITHUB_PAT = "github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz";
const SLACK = "xoxb-" + "1234567890-0987654321-AbCdEfGhIjKl";
const STRIPE_LIVE = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc";
const STRIPE_RESTRICTED = "rk_live_" + "4eC39HqLyjWDarjtT1zdp7dc";
const STRIPE_TEST = "sk_test_" + "4eC39HqLyjWDarjtT1zdp7dc";
const OPENAI = "sk-proj-" + "Ab12Cd34Ef56Gh78Ij90Kl12Mn34";
const ANTHROPIC = "sk-ant-api03-" + "Ab12Cd34Ef56Gh78Ij90Kl12Mn34-xyz";
const GOOGLE = "AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q";
const WHSEC = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const TOOLGATE = "tg_" + "live_0123456789abcdefABCDEF";
const PEM = "-----BEGIN RSA " + "PRIVATE KEY-----\nMIIEowIBAAKCAQEA1Y2v\nq3J+/a9==\n" +
  "-----END RSA PRIVATE KEY-----";

/** [what, input string, redacted string]: the surrounding text is kept. */
const VALUE_CASES: [string, string, string][] = [
  ["bearer token", "Authorization: Bearer abc123.def-456", `Authorization: ${REDACTED}`],
  ["bearer in prose", "sent with bearer t0k3n-xyz-99 today", `sent with bearer ${REDACTED} today`],
  ["basic credential", "curl -H 'Basic dXNlcjpwYXNz' x", `curl -H 'Basic ${REDACTED}' x`],
  ["JWT", `id=${JWT} end`, `id=${REDACTED} end`],
  [
    "URL credentials",
    "fetch https://alice:s3cr3t@db.example.com:5432/x now",
    `fetch https://alice:${REDACTED}@db.example.com:5432/x now`,
  ],
  [
    "URL password only",
    "redis://:hunter2@cache.internal:6379/0",
    `redis://:${REDACTED}@cache.internal:6379/0`,
  ],
  [
    "token query parameters",
    "https://api.example.com/v1/x?page=2&access_token=abc&api_key=k1&sig=s9#top",
    `https://api.example.com/v1/x?page=2&access_token=${REDACTED}&api_key=${REDACTED}&sig=${REDACTED}#top`,
  ],
  [
    "presigned URL",
    "https://b.s3.amazonaws.com/o?X-Amz-Credential=AK%2F2024&X-Amz-Signature=9f8e&X-Amz-Expires=60",
    `https://b.s3.amazonaws.com/o?X-Amz-Credential=${REDACTED}&X-Amz-Signature=${REDACTED}&X-Amz-Expires=60`,
  ],
  ["form body", "user=bob&password=hunter2&remember=1", `user=bob&password=${REDACTED}&remember=1`],
  [
    "JSON text",
    '{"user":"bob","password":"hun\\"ter2","tokens_used":12}',
    `{"user":"bob","password":"${REDACTED}","tokens_used":12}`,
  ],
  [
    "header lines",
    "GET / HTTP/1.1\nHost: x\nX-Api-Key: k-123\nCookie: a=1; b=2\nAccept: */*",
    `GET / HTTP/1.1\nHost: x\nX-Api-Key: ${REDACTED}\nCookie: ${REDACTED}\nAccept: */*`,
  ],
  ["AWS access key id", `key ${AWS} used`, `key ${REDACTED} used`],
  [
    "GitHub token",
    `git clone https://${GITHUB}@github.com/o/r`,
    `git clone https://${REDACTED}@github.com/o/r`,
  ],
  ["GitHub fine-grained token", `use ${GITHUB_PAT}`, `use ${REDACTED}`],
  ["Slack token", `slack ${SLACK} ok`, `slack ${REDACTED} ok`],
  ["Stripe live key", `stripe ${STRIPE_LIVE}`, `stripe ${REDACTED}`],
  ["Stripe restricted key", `stripe ${STRIPE_RESTRICTED}`, `stripe ${REDACTED}`],
  ["Stripe test key", `stripe ${STRIPE_TEST}`, `stripe ${REDACTED}`],
  ["OpenAI key", `OPENAI=${OPENAI}`, `OPENAI=${REDACTED}`],
  ["Anthropic key", `key is ${ANTHROPIC}.`, `key is ${REDACTED}.`],
  ["Google API key", `maps?${GOOGLE}`, `maps?${REDACTED}`],
  ["Standard Webhooks secret", `secret ${WHSEC}`, `secret ${REDACTED}`],
  ["toolgate key", `X ${TOOLGATE} Y`, `X ${REDACTED} Y`],
  ["PEM private key", `key:\n${PEM}\ndone`, `key:\n${REDACTED}\ndone`],
  ["cut PEM private key", `-----BEGIN ${"PRIVATE"} KEY-----\nMIIEv`, REDACTED],
];

/** Strings that must come out unchanged. */
const HARMLESS_VALUES = [
  "Deploy of api v2.14.3 finished: 3 canaries healthy, see https://grafana.example.com/d/x?orgId=1&from=now-1h",
  "Bearer authentication is described in RFC 6750",
  "Basic authentication",
  "https://example.com:8443/path?page=2&sort=name#frag",
  "mailto:bob@example.com",
  "user@example.com wrote: hi",
  "tokens_used=512&max_tokens=1024",
  '{"author":"ann","pagination":{"next":"c2"}}',
  "Publishable pk_live_4eC39HqLyjWDarjtT1zdp7dc is public",
  "task-0123456789abcdefghijklmnop and desk-0123456789abcdefghijklmn",
  "eyJ alone",
  "",
  "ok",
];

Deno.test("redact() finds secrets inside strings and keeps the text around them", () => {
  for (const [what, input, expected] of VALUE_CASES) {
    assertEquals(redact(input), expected, what);
    assertEquals(redact({ note: input }), { note: expected }, `${what} in an object`);
  }
});

Deno.test("redact() leaves strings without secrets unchanged", () => {
  for (const input of HARMLESS_VALUES) assertEquals(redact(input), input);
});

Deno.test("redact() redacts values at any depth, in arrays and under harmless keys", () => {
  const input = {
    request: {
      url: "https://u:p4ss@h.example/x?token=t1",
      headers: [["accept", "json"], ["x-debug", `Bearer ${JWT}`]],
    },
    nested: { deeper: { list: [{ note: `aws ${AWS}` }] } },
    count: 3,
  };
  assertEquals(redact(input), {
    request: {
      url: `https://u:${REDACTED}@h.example/x?token=${REDACTED}`,
      headers: [["accept", "json"], ["x-debug", `Bearer ${REDACTED}`]],
    },
    nested: { deeper: { list: [{ note: `aws ${REDACTED}` }] } },
    count: 3,
  });
});

Deno.test("redact() returns its own copy as is, and never modifies its input", () => {
  const input = { url: "https://a:b@h/", list: [GITHUB] };
  const once = redact(input);
  assert(redact(once) === once, "a redacted copy is not copied again");
  assertEquals(input, { url: "https://a:b@h/", list: [GITHUB] });
});

Deno.test("createRedactor() adds configured patterns to the built-in rules", () => {
  const redactor = createRedactor({ patterns: ["emp-\\d{6}", "(?<=ref:)[A-Z]{3}\\d+"] });
  assertEquals(
    redactor({ note: "for emp-123456 and emp-654321, ref:ABC42", url: "https://a:b@h/" }),
    {
      note: `for ${REDACTED} and ${REDACTED}, ref:${REDACTED}`,
      url: `https://a:${REDACTED}@h/`,
    },
  );
  assertEquals(redact({ note: "emp-123456" }), { note: "emp-123456" }, "not in the default");
});

Deno.test("redact.patterns: each entry must compile, and a bad one is named at config parse", () => {
  assertEquals(parseConfigFile({ redact: { patterns: ["a+b", "\\d{4}"] } }).redact.patterns, [
    "a+b",
    "\\d{4}",
  ]);
  const error = assertThrows(
    () => parseConfigFile({ redact: { patterns: ["ok", "emp-(\\d+"] } }),
  ) as GatewayError;
  assertEquals(error.code, "CONFIG_INVALID");
  assert(
    error.message.startsWith(
      'Invalid config.json: redact.patterns[1]: "emp-(\\\\d+" is not a valid regular expression (',
    ),
    error.message,
  );
  assert(
    error.message.endsWith(
      "): fix it or escape the special characters (\\. \\( \\[ …) (see docs/configuration.md)",
    ),
  );
  assertThrows(() => compileRedactPatterns(["["]), "redact.patterns[0]");
});

Deno.test("append() stores the input and outcome redacted", async () => {
  await using tmp = await tempStore();
  const log = createAuditLog({ store: tmp.store });
  const entry = await log.append({
    kind: "webhook.incoming",
    tool: "notify",
    input: {
      event: "push",
      auth: { token: "t-1" },
      list: [{ password: "p" }],
      hook: "https://ci.example/x?token=abc",
    },
    outcome: { accepted: true, endpoint_id: "in_1", api_key: "k", note: `saw ${SLACK}` },
  });
  await log.close();
  const expected = {
    input: {
      auth: REDACTED,
      event: "push",
      hook: `https://ci.example/x?token=${REDACTED}`,
      list: [{ password: REDACTED }],
    },
    outcome: { accepted: true, api_key: REDACTED, endpoint_id: "in_1", note: `saw ${REDACTED}` },
  };
  assertEquals({ input: entry.input, outcome: entry.outcome }, expected);
  const stored = await readRaw(tmp.store, 1);
  assertEquals({ input: stored.input, outcome: stored.outcome }, expected);
});

Deno.test("createAuditLog({ redact }) applies the configured redactor to entries", async () => {
  await using tmp = await tempStore();
  const log = createAuditLog({
    store: tmp.store,
    redact: createRedactor({ patterns: ["emp-\\d{6}"] }),
  });
  const entry = await log.append({
    kind: "webhook.incoming",
    tool: "t",
    input: { who: "emp-123456" },
    outcome: { accepted: true, endpoint_id: "in_1" },
  });
  await log.close();
  assertEquals(entry.input, { who: REDACTED });
});
