//! What the tool definitions cost in tokens. Every tool a `tools/list` response carries
//! sits in an agent's context for the whole session, so its definition — name, title,
//! description, `inputSchema`, `outputSchema`, annotations — is paid for on every turn.
//! This counts, with the `o200k_base` encoding (tiktoken's, embedded in the `tiktoken-rs`
//! crate, so nothing is downloaded), the JSON of each tool exactly as `cheng serve` sends
//! it to a client holding the `developer` role, against the reference server,
//! `@modelcontextprotocol/server-filesystem` (14 tools), asked the same way in the same
//! run. It prints a table per server (each tool's tokens, split by field), the per-tool
//! averages and their ratio (each server's `instructions`, sent once per session, shared
//! out over its tools), and the same for name + description + `inputSchema` alone
//! (what many clients pass to the model). Goal: Cheng's per-tool average at most 1.5×
//! server-filesystem's.
//!
//! Run: `cargo bench --bench all -- tokens`. The reference server is installed with
//! `npm install --prefix target/bench-peers @modelcontextprotocol/server-filesystem@2026.8.31`;
//! without it only Cheng's side is printed, and says so.
//!
//! Both servers are asked over stdio with plain newline-delimited JSON-RPC rather than
//! through rmcp's client: rmcp parses a tool into its own types and serde_json maps, so
//! writing it back would reorder keys and drop fields it does not model, and the count
//! would no longer be of the bytes the server sent. Each tool is kept as the slice of the
//! response that holds it.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use rmcp::model::ProtocolVersion;
use serde_json::{Value, json};
use tiktoken_rs::CoreBPE;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const GOAL: f64 = 1.5;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// `cheng serve` on stdio as the `developer` role, with a state directory and a
/// workspace of its own and no user configuration, so the built-in tools are what is
/// listed.
fn cheng(state: &Path, ws: &Path) -> tokio::process::Command {
    let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_cheng"));
    c.arg("--state-dir").arg(state).arg("--workspace").arg(ws).args(["--role", "developer", "serve"]);
    c.env("CHENG_LOG", "error").env_remove("CHENG_CONFIG").env("XDG_CONFIG_HOME", state.join("no-config"));
    c
}

/// Each tool of the server's `tools/list` (every page), as the JSON text it sent, and
/// the `instructions` of its `initialize` answer (sent once per session), if any.
async fn list_tools(mut cmd: tokio::process::Command) -> (Vec<String>, Option<String>) {
    let mut child =
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null()).kill_on_drop(true).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut send = async |msg: Value| {
        stdin.write_all(format!("{msg}\n").as_bytes()).await.unwrap();
        stdin.flush().await.unwrap();
    };
    // The first start of Cheng compiles and describes the built-in components.
    let mut answer = async |id: u64| -> String {
        let wait = tokio::time::timeout(Duration::from_secs(300), async {
            loop {
                let line = lines.next_line().await.unwrap().expect("the server answers before it exits");
                // Notifications and requests of the server's own are not the answer.
                let msg: Value = serde_json::from_str(&line).unwrap();
                if msg.get("method").is_none() && msg["id"] == json!(id) {
                    assert!(msg.get("error").is_none(), "request {id} failed: {line}");
                    return line;
                }
            }
        });
        wait.await.expect("the server answers within 300 s")
    };
    let version = ProtocolVersion::LATEST_WITH_INITIALIZE.to_string();
    send(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "cheng-bench", "version": "0"}}}))
    .await;
    let init = answer(0).await;
    let instructions = field(&init, "result").and_then(|r| field(r, "instructions")).map(str::to_string);
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
    let mut tools = Vec::new();
    let mut cursor: Option<Value> = None;
    for id in 1.. {
        let params = cursor.take().map(|c| json!({"cursor": c})).unwrap_or(json!({}));
        send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": params})).await;
        let line = answer(id).await;
        let result = field(&line, "result").expect("a result");
        let page = field(result, "tools").expect("a tools array");
        tools.extend(members(page).into_iter().map(|(_, t)| t.to_string()));
        match field(result, "nextCursor").map(|c| serde_json::from_str::<Value>(c).unwrap()) {
            Some(c) if !c.is_null() => cursor = Some(c),
            _ => break,
        }
    }
    drop(child);
    (tools, instructions)
}

/// The value of `key` in the JSON object `text`, as the text it was sent as.
fn field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    members(text).into_iter().find(|(k, _)| k.as_deref() == Some(key)).map(|(_, v)| v)
}

/// The members of the JSON object or array `text`, each value the slice of `text` that
/// holds it (the key is `None` for an array's items).
fn members(text: &str) -> Vec<(Option<String>, &str)> {
    let text = text.trim();
    let b = text.as_bytes();
    let object = b[0] == b'{';
    let mut out = Vec::new();
    let mut i = skip_ws(b, 1);
    while b[i] != b'}' && b[i] != b']' {
        let key = if object {
            let end = value_end(b, i);
            let key = serde_json::from_str::<String>(&text[i..end]).unwrap();
            i = skip_ws(b, end);
            assert_eq!(b[i], b':', "a colon after the key {key:?}");
            i = skip_ws(b, i + 1);
            Some(key)
        } else {
            None
        };
        let end = value_end(b, i);
        out.push((key, &text[i..end]));
        i = skip_ws(b, end);
        if b[i] == b',' {
            i = skip_ws(b, i + 1);
        }
    }
    out
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while b[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

/// Where the JSON value that starts at `i` ends (exclusive). Only ASCII bytes are
/// compared, so the ends always fall on character boundaries.
fn value_end(b: &[u8], mut i: usize) -> usize {
    let (mut depth, mut in_string) = (0usize, false);
    loop {
        let c = b[i];
        i += 1;
        if in_string {
            match c {
                b'\\' => i += 1,
                b'"' => {
                    in_string = false;
                    if depth == 0 {
                        return i;
                    }
                }
                _ => {}
            }
            continue;
        }
        match c {
            b'"' => in_string = true,
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            // A number, true, false or null ends at the next delimiter.
            _ if depth == 0 && (i == b.len() || matches!(b[i], b',' | b'}' | b']') || b[i].is_ascii_whitespace()) => {
                return i;
            }
            _ => {}
        }
    }
}

/// One tool's count: the whole definition, its three large fields, and the part many
/// clients pass to the model.
struct Row {
    name: String,
    total: usize,
    description: usize,
    input: usize,
    output: usize,
    core: usize,
}

fn row(bpe: &CoreBPE, tool: &str) -> Row {
    // The slices must hold every member of the tool the server sent, each one whole.
    let parsed: Value = serde_json::from_str(tool).unwrap();
    let fields = members(tool);
    assert_eq!(fields.len(), parsed.as_object().unwrap().len(), "every member of {tool}");
    for (key, value) in &fields {
        let key = key.as_deref().unwrap();
        assert_eq!(serde_json::from_str::<Value>(value).unwrap(), parsed[key], "the member {key} of {tool}");
    }
    let get = |k: &str| fields.iter().find(|(key, _)| key.as_deref() == Some(k)).map(|(_, v)| *v);
    let count = |s: Option<&str>| s.map_or(0, |s| bpe.encode_ordinary(s).len());
    let core = format!(
        "{{\"name\":{},\"description\":{},\"inputSchema\":{}}}",
        get("name").unwrap(),
        get("description").unwrap_or("\"\""),
        get("inputSchema").unwrap()
    );
    Row {
        name: parsed["name"].as_str().unwrap().to_string(),
        total: count(Some(tool)),
        description: count(get("description")),
        input: count(get("inputSchema")),
        output: count(get("outputSchema")),
        core: count(Some(&core)),
    }
}

/// Prints the table and returns the per-tool averages of the whole definition (the
/// server's instructions, `instructions` tokens, shared out over its tools) and of
/// name + description + `inputSchema`.
fn table(server: &str, rows: &[Row], instructions: usize) -> (f64, f64) {
    println!("{server}: {} tools", rows.len());
    println!(
        "  {:<28} {:>6} {:>12} {:>12} {:>13} {:>6} {:>16}",
        "tool", "tokens", "description", "inputSchema", "outputSchema", "other", "name+desc+input"
    );
    for r in rows {
        // Keys, punctuation, title, annotations and the like.
        let other = r.total.saturating_sub(r.description + r.input + r.output);
        println!(
            "  {:<28} {:>6} {:>12} {:>12} {:>13} {:>6} {:>16}",
            r.name, r.total, r.description, r.input, r.output, other, r.core
        );
    }
    let n = rows.len() as f64;
    let sum = |f: fn(&Row) -> usize| rows.iter().map(f).sum::<usize>();
    let avg = |f: fn(&Row) -> usize| sum(f) as f64 / n;
    println!(
        "  total {} tokens; per tool {:.0} (description {:.0}, inputSchema {:.0}, outputSchema {:.0}); \
         name+desc+input {:.0}",
        sum(|r| r.total),
        avg(|r| r.total),
        avg(|r| r.description),
        avg(|r| r.input),
        avg(|r| r.output),
        avg(|r| r.core)
    );
    let whole = (sum(|r| r.total) + instructions) as f64 / n;
    println!("  instructions: {instructions} tokens once per session; per tool with them shared out: {whole:.0}");
    (whole, avg(|r| r.core))
}

/// The benchmark (`cargo bench --bench all -- tokens`).
pub async fn main() {
    let bpe = tiktoken_rs::o200k_base().expect("the o200k_base encoding loads");
    let state = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let instructions = |i: Option<String>| i.map_or(0, |i| bpe.encode_ordinary(&i).len());
    let (tools, said) = list_tools(cheng(state.path(), ws.path())).await;
    let ours: Vec<Row> = tools.iter().map(|t| row(&bpe, t)).collect();
    let (ours_all, ours_core) = table("cheng serve, role developer", &ours, instructions(said));

    let reference =
        repo().join("target/bench-peers/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    if !reference.is_file() {
        println!("reference server not installed ({}): comparison left out", reference.display());
        return;
    }
    let mut node = tokio::process::Command::new("node");
    node.arg(&reference).arg(ws.path());
    let (tools, said) = list_tools(node).await;
    let theirs: Vec<Row> = tools.iter().map(|t| row(&bpe, t)).collect();
    let (theirs_all, theirs_core) = table("server-filesystem", &theirs, instructions(said));
    let ratio = ours_all / theirs_all;
    println!(
        "per tool, whole definition: cheng {ours_all:.0}, server-filesystem {theirs_all:.0} tokens: {ratio:.2}x (goal <= \
         {GOAL}x) {}",
        if ratio <= GOAL { "met" } else { "missed" }
    );
    println!(
        "per tool, name + description + inputSchema: cheng {ours_core:.0}, server-filesystem {theirs_core:.0} tokens: \
         {:.2}x",
        ours_core / theirs_core
    );
}
