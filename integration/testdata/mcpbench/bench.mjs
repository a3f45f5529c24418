// Times tool calls through the official TypeScript MCP client: dshfs mcp and
// the MCP reference filesystem server, the same work on the same disk,
// interleaved call by call so both see the same noise. Prints one JSON line
// of per-workload medians and percentiles, in microseconds.
//
// node bench.mjs CALLS DSHFS_BIN MOUNT REFERENCE_DIR
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const [calls, dshfs, mount, refDir] = [Number(process.argv[2]), process.argv[3], process.argv[4], process.argv[5]];
const refServer = fileURLToPath(new URL("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js", import.meta.url));

async function connect(command, args) {
  const client = new Client({ name: "dshfs-mcpbench", version: "1" });
  await client.connect(new StdioClientTransport({ command, args, env: { ...process.env }, stderr: "inherit" }));
  return client;
}

// A 4 KiB text file of 64-byte lines, with a marker an edit flips.
const line = "0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopq\n";
const body = "MARKER-A\n" + line.repeat(63) + line.slice(0, 64 - 9);
for (const dir of [mount, refDir]) writeFileSync(join(dir, "f.txt"), body);

const servers = {
  dshfs: {
    client: await connect(dshfs, ["mcp", "--mount", mount]),
    read: () => ({ name: "read", arguments: { file_path: join(mount, "f.txt") } }),
    edit: (from, to) => ({ name: "edit", arguments: { file_path: join(mount, "f.txt"), old_string: from, new_string: to } }),
  },
  reference: {
    client: await connect(process.execPath, [refServer, refDir]),
    read: () => ({ name: "read_text_file", arguments: { path: join(refDir, "f.txt") } }),
    edit: (from, to) => ({ name: "edit_file", arguments: { path: join(refDir, "f.txt"), edits: [{ oldText: from, newText: to }] } }),
  },
};

async function timed(s, req) {
  const t0 = process.hrtime.bigint();
  const r = await s.client.callTool(req);
  const us = Number(process.hrtime.bigint() - t0) / 1000;
  if (r.isError) throw new Error(`${req.name}: ${JSON.stringify(r.content)}`);
  return us;
}

const samples = {};
for (const name of Object.keys(servers)) samples[name] = { read: [], edit: [] };
// dshfs's edit needs a read first (read-before-write); warm both up.
for (const s of Object.values(servers)) for (let i = 0; i < 50; i++) await timed(s, s.read());
let marker = "MARKER-A";
for (let i = 0; i < calls; i++) {
  const next = marker === "MARKER-A" ? "MARKER-B" : "MARKER-A";
  for (const [name, s] of i % 2 ? Object.entries(servers) : Object.entries(servers).reverse()) {
    samples[name].read.push(await timed(s, s.read()));
    samples[name].edit.push(await timed(s, s.edit(marker, next)));
  }
  marker = next;
}
const pct = (xs, p) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(p * (s.length - 1))]; };
const out = {};
for (const [name, w] of Object.entries(samples))
  for (const [op, xs] of Object.entries(w)) out[`${name}_${op}`] = { p50: pct(xs, 0.5), p90: pct(xs, 0.9), p99: pct(xs, 0.99) };
console.log(JSON.stringify(out));
for (const s of Object.values(servers)) await s.client.close();
