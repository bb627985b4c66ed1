// A real TypeScript MCP client driving `cheng serve`: the official SDK 1.x
// (`@modelcontextprotocol/sdk`) or 2.x (`@modelcontextprotocol/client`), loaded from the
// node_modules directory given, over stdio or streamable HTTP. Run by tests/all/clients.rs:
//
//   node ts_client.mjs --modules DIR --major 1|2 (--stdio CMD ARGS... | --url URL --token T)
//
// Both SDKs validate a result's structuredContent against the tool's outputSchema (Ajv)
// and log a warning for every schema keyword or format they do not know; every warning
// they print goes to stderr, which the Rust test reads. The observations are printed
// as one JSON object on the last line of stdout.
import { pathToFileURL } from "node:url";
import path from "node:path";

const argv = process.argv.slice(2);
const opt = (name) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
const modules = opt("--modules");
const major = opt("--major");
const stdioAt = argv.indexOf("--stdio");
const url = opt("--url");
const token = opt("--token");
const marker = opt("--marker") ?? "100.375";

const load = (sub) => import(pathToFileURL(path.join(modules, sub)).href);
let Client, StdioClientTransport, StreamableHTTPClientTransport;
if (major === "1") {
  const base = "@modelcontextprotocol/sdk/dist/esm/client";
  ({ Client } = await load(`${base}/index.js`));
  ({ StdioClientTransport } = await load(`${base}/stdio.js`));
  ({ StreamableHTTPClientTransport } = await load(`${base}/streamableHttp.js`));
} else {
  const base = "@modelcontextprotocol/client/dist";
  ({ Client, StreamableHTTPClientTransport } = await load(`${base}/index.mjs`));
  ({ StdioClientTransport } = await load(`${base}/stdio.mjs`));
}

const transport =
  stdioAt >= 0
    ? new StdioClientTransport({ command: argv[stdioAt + 1], args: argv.slice(stdioAt + 2), stderr: "ignore" })
    : new StreamableHTTPClientTransport(new URL(url), {
        requestInit: { headers: { Authorization: `Bearer ${token}` } },
      });

const client = new Client({ name: `cheng-matrix-ts${major}`, version: "1.0.0" });
const logs = [];
if (major === "1") {
  const { LoggingMessageNotificationSchema } = await load("@modelcontextprotocol/sdk/dist/esm/types.js");
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => logs.push(n.params));
} else {
  client.setNotificationHandler("notifications/message", (n) => logs.push(n.params));
}
await client.connect(transport);

const text = (r) => (r.content ?? []).map((c) => c.text ?? "").join("");
// A call as the agent sees it: the result, or the error the SDK raised instead.
async function call(name, args, options) {
  try {
    const r = await client.callTool({ name, arguments: args }, undefined, options);
    let envelope = null;
    if (r.isError) {
      try { envelope = JSON.parse(text(r)); } catch { envelope = null; }
    }
    return { is_error: !!r.isError, structured: r.structuredContent ?? null, text: text(r), envelope };
  } catch (e) {
    return { thrown: String(e?.message ?? e) };
  }
}

const out = {};
const tools = (await client.listTools()).tools;
out.tools = tools.map((t) => t.name).sort();
out.success = await call("read_file", { path: "inside.txt" });
out.list_dir = await call("list_dir", {});
out.not_found = await call("read_file", { path: "no/such/file.txt" });
out.refused = await call("read_file", { path: "../outside.txt" });
out.bad_args = await call("read_file", { nope: 1 });
out.denied = await call("evil__probe", { action: "read", target: "inside.txt" });
// Every other tool once, so each output schema meets a real result through Ajv.
out.every = {};
for (const [name, args] of Object.entries({
  find_files: { pattern: "*.txt" },
  read_files: { paths: ["inside.txt"] },
  search_files: { pattern: "inside" },
  workspace_markdown: { operation: "outline", path: "docs/a.md" },
  workspace_preview: { operation: "markdown", path: "docs/a.md" },
  think: { thought: "matrix" },
  todo_write: { todos: [{ id: "1", content: "x", status: "pending" }] },
  write_file: { path: "out/ts.txt", content: "ts\n" },
  workspace_tests: { operation: "detect" },
})) {
  out.every[name] = await call(name, args);
}
// An approval a person answers elsewhere (the Rust test, through the operator API or
// the socket); the client resets its timeout on progress.
out.approved = await call(
  "workspace_shell",
  { command: "echo", args: ["approved-by-operator"], purpose: "client matrix" },
  { onprogress: () => {}, resetTimeoutOnProgress: true, timeout: 60000 },
);
// Cancellation: the SDK aborts the request and sends notifications/cancelled.
const abort = new AbortController();
setTimeout(() => abort.abort("matrix cancel"), 1500);
out.cancelled = await call("workspace_shell", { command: "sleep", args: [marker], timeout_ms: 600000 }, {
  signal: abort.signal,
});
out.after_cancel = await call("read_file", { path: "inside.txt" });
out.logs = logs;
await client.close();
console.log(JSON.stringify(out));
process.exit(0);
