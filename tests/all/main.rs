//! Cheng's integration tests: one binary, one module per topic.

// Shared helpers: building guest programs on demand, temporary workspaces, hosts.
mod util;
// The host library's modules in layers: no import points sideways or up.
mod layers;
// The foundation's hostile components: every escape attempt contained, with controls.
mod sandbox;
// The `cheng` command line, as a user runs it.
mod cli;
// read_file and list_dir on real files.
mod fs_tools;
// The host core: command rules on resolved programs, escaped cards, host-only denials,
// per-tool memory, an audit log that fails closed.
mod host_core;
// Commands run unasked, and commands that attack the host: confinement tiers, git's
// configured programs, PATH and config planting, signals, leftovers.
mod unasked;
// The known-safe list: read-only commands run with nobody asked, confined, recorded as
// such; what writes or runs something, or is not the host's own program, still asks.
mod known_safe;
// Answers that remember (this run, always), tiers, and declines with a message.
mod remembered;
// Network by host name for commands: the host's proxy in the command's own namespace.
mod net_hosts;
// Each route that answers (API, socket CLI, terminal, MCP client) with its scopes.
mod answer_routes;
// Path rules in the file tools: files run later and likely secrets ask; a search skips them.
mod path_rules;
// Calls that must end and say what happened: FIFOs, devices, huge patterns and
// arguments, exit codes, log escapes, the sanitizer, pathspecs, renames, .git spellings.
mod bounds;
// `cheng serve` with the official MCP Python SDK as the client, and the HTTP gate.
mod serve;
// Nothing the host starts can approve, read or outlive it: commands of each tier and
// MCP servers attack the approvals socket, the host's /proc and its lifetime.
mod children;
// The operator API, the approvals socket, and the console in headless Chromium.
mod console;
// The embedder API: unknown tools, bad arguments, grants, cancellation, concurrency.
mod host_api;
// Approvals: every answer path, before any tool that needs them.
mod approvals;
// Call records, the audit log, `cheng records`, run budgets.
mod records;
// Operator policy: external workspaces, per-tool settings, protected paths.
mod policy;
// The file toolset and the pathless tools.
mod file_tools;
// Killing the host in the middle of writes and patches loses nothing.
mod crash;
// A slow disk under one call's write holds up no other call.
mod slow_disk;
// The ignore-aware walk agrees with ripgrep.
mod walk_equivalence;
// Third-party components: loading, pins, refusals at load, inspect.
mod plugins;
// Signed plugins: minisign signatures checked in-process.
mod signatures;
// Plugin components pulled from a real OCI registry, and from one that lies.
mod oci;
// The README's plugin walkthrough, verbatim.
mod examples;
// workspace_shell and process spawning: real processes, every termination, the attacks.
mod shell;
// Test-runner output parsers on recorded real output.
mod test_report;
// workspace_tests: detect per ecosystem, live runs of small projects.
mod workspace_tests;
// workspace_markdown and workspace_preview on real documents, XSS corpus, metadata.
mod markdown_preview;
// workspace_git against the git CLI on repositories made here.
mod git;
// workspace_git_write against the git CLI; hooks, filters and aliases that must not run.
mod git_write;
// The repository files the host reads before running git: FIFOs, devices, oversized ones.
mod git_reads;
// The host's own files (config, tokens, settings, plugins and signatures, cache, pins,
// OCI store, run state): FIFOs, devices behind links, oversized ones.
mod hostfiles;
// web_fetch and web_search against local servers, the egress guard, rebinding, net grants.
mod web;
// External MCP servers under confinement: real npm and PyPI servers, a hostile one.
mod mcp;

// What `cheng serve` sends matches what it declares, for every tool.
mod schemas;
// The workspace a session gets: given, pinned, or from its roots; never the home.
mod workspaces;
// The client matrix: official TypeScript SDKs and the Inspector CLI.
mod clients;
// OpenTelemetry export to a collector on loopback, trace context in and out.
mod telemetry;
