// Helpers for run.sh: make the test image, and check what a harness handed
// the stand-in model for each of its tool calls against what dshfs's socket
// answered for the same call on a mirror of the files.
//
//   node check.mjs png FILE                         write a 12x7 PNG
//   node check.mjs expect PLAN WS MIRROR EXPECT     make the planned calls over the socket on MIRROR
//   node check.mjs claude LOG EXPECT WS MIRROR      Claude Code's tool_result blocks
//   node check.mjs codex LOG EXPECT WS MIRROR       Codex's function_call_output items
//   node check.mjs opencode LOG EXPECT WS MIRROR    OpenCode's tool_result blocks
//   node check.mjs structured LOG                   print what the model got (no check)
//
// LOG is the stand-in's request log; EXPECT a directory of `dshfs call --json`
// results, 0.json, 1.json, ..., one per planned call, made on MIRROR; WS is
// where the harness's calls went (paths in the texts differ only by that).
// Each check prints "ok - ..." or "FAIL - ..."; run.sh counts them.
import fs from "node:fs";
import path from "node:path";
import zlib from "node:zlib";
import { execFileSync } from "node:child_process";

const [cmd, ...args] = process.argv.slice(2);

let failed = 0;
function check(cond, what, detail) {
  console.log(`${cond ? "ok" : "FAIL"} - ${what}`);
  if (!cond) {
    failed++;
    if (detail !== undefined) console.log("    " + String(detail).replace(/\n/g, "\n    "));
  }
}

// show prints a block with long base64 cut short.
const show = (v) => JSON.stringify(v, (k, x) => (typeof x === "string" && x.length > 120 && /^[A-Za-z0-9+/=:;,.a-z-]+$/.test(x) ? x.slice(0, 48) + `…(${x.length} chars)` : x));

function png(file) {
  const [w, h] = [12, 7];
  const table = Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  const crc = (b) => {
    let c = 0xffffffff;
    for (const x of b) c = table[(c ^ x) & 255] ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  };
  const chunk = (type, data) => {
    const len = Buffer.alloc(4), sum = Buffer.alloc(4), td = Buffer.concat([Buffer.from(type), data]);
    len.writeUInt32BE(data.length);
    sum.writeUInt32BE(crc(td));
    return Buffer.concat([len, td, sum]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0);
  ihdr.writeUInt32BE(h, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 2; // RGB
  const raw = Buffer.alloc((w * 3 + 1) * h);
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) raw.set([x * 20, y * 30, 128], y * (w * 3 + 1) + 1 + x * 3);
  }
  fs.writeFileSync(file, Buffer.concat([Buffer.from([137, 80, 78, 71, 13, 10, 26, 10]), chunk("IHDR", ihdr),
    chunk("IDAT", zlib.deflateSync(raw)), chunk("IEND", Buffer.alloc(0))]));
}

// expect makes each planned call (a JSON array of {name, input}, paths in
// ws) with `dshfs call --json` on the mirror, as one actor, and keeps the
// answers in dir.
function expect([plan, ws, mirror, dir]) {
  fs.mkdirSync(dir, { recursive: true });
  for (const [i, step] of JSON.parse(plan).entries()) {
    const input = JSON.parse(JSON.stringify(step.input).split(ws).join(mirror));
    let out;
    try {
      out = execFileSync("dshfs", ["call", "--json", "--actor", "mirror", step.name.replace(/^mcp__dshfs__/, ""), JSON.stringify(input)], { cwd: mirror });
    } catch (e) {
      if (e.status !== 1) throw e; // 1: the tool returned an error
      out = e.stdout;
    }
    fs.writeFileSync(path.join(dir, `${i}.json`), out);
    fs.writeFileSync(path.join(dir, `${i}.call`), JSON.stringify(step));
  }
}

// isJSON tells whether a text is a JSON object or array, as a harness's
// JSON.stringify(structuredContent) would be.
function isJSON(text) {
  try {
    const v = JSON.parse(text);
    return typeof v === "object" && v !== null;
  } catch {
    return false;
  }
}

const requests = (log) => fs.readFileSync(log, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l));

// expected loads the socket's answers, their paths moved from mirror to ws.
function expected(dir, ws, mirror) {
  const out = [];
  for (let i = 0; fs.existsSync(path.join(dir, `${i}.json`)); i++) {
    const r = JSON.parse(fs.readFileSync(path.join(dir, `${i}.json`), "utf8"));
    const call = JSON.parse(fs.readFileSync(path.join(dir, `${i}.call`), "utf8"));
    out.push({ ...call, text: r.text.split(mirror).join(ws), isError: !!r.is_error, value: r.value });
  }
  return out;
}

// How each Messages-API harness names dshfs's tools and its own built-in
// file tools.
const HARNESSES = {
  claude: { label: "Claude Code", name: (t) => `mcp__dshfs__${t}`, builtins: ["Read", "Write", "Edit"] },
  opencode: { label: "OpenCode", name: (t) => `dshfs_${t}`, builtins: ["read", "write", "edit"] },
};
const TOOLS = ["read", "write", "edit", "read_image"];

// messages checks a harness that speaks the Anthropic Messages API.
function messages(h, [log, dir, ws, mirror]) {
  const want = expected(dir, ws, mirror);
  const DSHFS = TOOLS.map(h.name);
  const reqs = requests(log).filter((r) => r.path.startsWith("/v1/messages") && !r.path.includes("count_tokens"));
  // The agent's requests are those offering dshfs's tools: in tools, or by
  // name in the deferred-tools list ToolSearch loads them from.
  const agent = reqs.filter((r) => JSON.stringify([r.body.tools, r.body.system, r.body.messages]).includes(h.name("read")));
  check(agent.length > want.length, `${h.label} sent ${agent.length} agent requests for ${want.length} planned calls`);
  for (const [i, r] of agent.entries()) {
    const tools = (r.body.tools || []).map((t) => t.name);
    const named = JSON.stringify([r.body.system, r.body.messages]);
    const builtins = h.builtins.filter((b) => tools.includes(b));
    const missing = DSHFS.filter((d) => !tools.includes(d) && !named.includes(d));
    check(builtins.length === 0 && missing.length === 0, `request ${i}: no built-in ${h.builtins.join("/")}, all of ${DSHFS.join(", ")} offered`,
      `built-ins offered: ${builtins}; dshfs tools missing: ${missing}; tools: ${tools}`);
  }
  const last = agent[agent.length - 1]?.body.messages || [];
  const results = new Map();
  for (const m of last) for (const b of Array.isArray(m.content) ? m.content : []) if (b.type === "tool_result") results.set(b.tool_use_id, b);
  for (const [i, w] of want.entries()) {
    const got = results.get("toolu_standin_" + i);
    if (!got) {
      check(false, `${w.name} #${i}: a tool_result came back`);
      continue;
    }
    console.log(`    ${w.name} #${i} tool_result: ${show(got)}`);
    const blocks = typeof got.content === "string" ? [{ type: "text", text: got.content }] : got.content;
    check(blocks[0]?.type === "text" && blocks[0].text === w.text, `${w.name} #${i}: the model got exactly dshfs's text`,
      `got ${show(blocks[0])}\nwant ${JSON.stringify(w.text)}`);
    check(!!got.is_error === w.isError, `${w.name} #${i}: is_error ${w.isError}`);
    check(!blocks.some((b) => b.type === "text" && isJSON(b.text)), `${w.name} #${i}: no JSON in place of the text`);
    if (w.name.endsWith("read_image") && !w.isError) {
      const img = blocks.find((b) => b.type === "image");
      const file = fs.readFileSync(w.input.file_path.split(ws).join(mirror)).toString("base64");
      check(img?.source?.type === "base64" && img.source.media_type === "image/png" && img.source.data === file,
        `${w.name} #${i}: an image block with the file's PNG`, show(img));
      const extra = blocks.filter((b) => b !== blocks[0] && b !== img);
      if (extra.length) console.log(`    (${h.label} added: ${show(extra)})`);
    } else {
      check(blocks.length === 1, `${w.name} #${i}: one block`, show(blocks));
    }
  }
}

function codex([log, dir, ws, mirror]) {
  const want = expected(dir, ws, mirror);
  const reqs = requests(log).filter((r) => r.path.startsWith("/v1/responses"));
  const ns = (r) => (r.body.tools || []).find((t) => t.type === "namespace" && t.name === "mcp__dshfs");
  const offered = ns(reqs[0] || { body: {} })?.tools?.map((t) => t.name) || [];
  check(["read", "write", "edit", "read_image"].every((n) => offered.includes(n)), `Codex offered the namespace mcp__dshfs: ${offered}`);
  const last = reqs[reqs.length - 1]?.body.input || [];
  const outputs = new Map(last.filter((i) => i.type === "function_call_output").map((i) => [i.call_id, i]));
  for (const [i, w] of want.entries()) {
    const got = outputs.get("call_standin_" + i);
    if (!got) {
      check(false, `${w.name} #${i}: a function_call_output came back`);
      continue;
    }
    console.log(`    ${w.name} #${i} function_call_output: ${show(got.output)}`);
    const items = typeof got.output === "string" ? [{ type: "input_text", text: got.output }] : got.output;
    // Codex puts its own "Wall time: …\nOutput:" item first.
    const texts = items.filter((x) => x.type === "input_text").map((x) => x.text);
    check(texts.includes(w.text), `${w.name} #${i}: the model got exactly dshfs's text`, `got ${show(items)}\nwant ${JSON.stringify(w.text)}`);
    check(!texts.some(isJSON), `${w.name} #${i}: no JSON in place of the text`);
    if (w.name.endsWith("read_image") && !w.isError) {
      const file = fs.readFileSync(w.input.file_path.split(ws).join(mirror)).toString("base64");
      const img = items.find((x) => x.type === "input_image");
      check(img?.image_url === "data:image/png;base64," + file, `${w.name} #${i}: an input_image with the file's PNG`, show(img));
    }
  }
}

// structured prints what the model got for each of the stand-in's calls.
function structured([log]) {
  const reqs = requests(log).filter((r) => r.path.startsWith("/v1/messages"));
  const last = reqs[reqs.length - 1]?.body.messages || [];
  for (const m of last) {
    for (const b of Array.isArray(m.content) ? m.content : []) {
      if (b.type === "tool_result" && b.tool_use_id.startsWith("toolu_standin_") && !b.tool_use_id.endsWith("search")) {
        console.log(`    with --structured-content the model got: ${show(b.content)}`);
      }
    }
  }
}

switch (cmd) {
  case "png": png(args[0]); break;
  case "expect": expect(args); break;
  case "claude": messages(HARNESSES.claude, args); break;
  case "opencode": messages(HARNESSES.opencode, args); break;
  case "codex": codex(args); break;
  case "structured": structured(args); break;
  default: console.error("usage: check.mjs png|expect|claude|codex|opencode|structured ..."); process.exit(2);
}
process.exit(failed ? 1 : 0);
