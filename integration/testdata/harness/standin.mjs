// A stand-in for a model provider that plays a model driving dshfs's MCP
// tools, so a real harness shows what it hands the model: the Anthropic
// Messages API (Claude Code; OpenCode's anthropic provider) and the OpenAI
// Responses API (Codex).
//
//   node standin.mjs            (configured by the environment)
//
// STANDIN_PORT      port on 127.0.0.1 (0: any; the port is written to STANDIN_PORT_FILE)
// STANDIN_LOG       every request received, one JSON object a line: {method, path, body}
// STANDIN_PLAN      JSON array of the tool calls to make in turn, each {name, input},
//                   named as Claude Code names them ("mcp__dshfs__read"); once they
//                   have all been answered the model ends its turn.
//
// A request that offers the planned tools is the agent's turn: the reply is
// the next planned call, chosen by how many of the stand-in's own call ids
// have a result in the request. Any other request (titles, summaries, quota
// checks) gets a short text. POST /v1/messages answers as SSE when the body
// asks for stream: true, as one JSON message otherwise; POST
// /v1/messages/count_tokens answers a count; POST /v1/responses answers as
// SSE; anything else is a 404 error. It listens on 127.0.0.1 only.
import http from "node:http";
import fs from "node:fs";

const plan = JSON.parse(process.env.STANDIN_PLAN || "[]");
const log = process.env.STANDIN_LOG || "/dev/null";
const ID = "toolu_standin_";

function record(req, body) {
  let parsed = body;
  try { parsed = JSON.parse(body); } catch { /* keep the text */ }
  fs.appendFileSync(log, JSON.stringify({ method: req.method, path: req.url, body: parsed }) + "\n");
}

// answered counts the stand-in's planned calls that the request carries a
// result for; searched tells whether its ToolSearch call has one.
function results(messages) {
  const ids = new Set();
  for (const m of messages || []) {
    if (!Array.isArray(m.content)) continue;
    for (const b of m.content) {
      if (b.type === "tool_result" && String(b.tool_use_id).startsWith(ID)) ids.add(b.tool_use_id);
    }
  }
  return { answered: [...ids].filter((id) => id !== ID + "search").length, searched: ids.has(ID + "search") };
}

const call = (id, name, input) => ({ content: [{ type: "tool_use", id: ID + id, name, input }], stop: "tool_use" });

// offeredAs is the name under which a request's tools offer a planned tool
// ("mcp__dshfs__read"): that name (Claude Code), or "dshfs_read" (OpenCode
// names an MCP tool server_tool); undefined if neither is offered.
function offeredAs(tools, planned) {
  const m = /^mcp__(.+?)__(.+)$/.exec(planned);
  return [planned, m && `${m[1]}_${m[2]}`].find((n) => n && tools.has(n));
}

// reply decides the assistant message: content blocks and stop reason. The
// agent's turn is a request whose tools hold the planned tools, or
// ToolSearch while they are deferred (Claude Code defers MCP tools: listed
// by name in the system prompt, their schemas loaded by a ToolSearch call
// "select:a,b"), which the stand-in then calls first, as a model would.
function reply(body) {
  const tools = new Map((body.tools || []).map((t) => [t.name, t]));
  const loaded = plan.length > 0 && plan.every((p) => offeredAs(tools, p.name) && !tools.get(offeredAs(tools, p.name)).defer_loading);
  const { answered, searched } = results(body.messages);
  if (plan.length === 0 || (!loaded && !(tools.has("ToolSearch") && (searched || mentions(body, plan[0].name))))) {
    return { content: [{ type: "text", text: "ok" }], stop: "end_turn" };
  }
  if (!loaded && !searched) {
    return call("search", "ToolSearch", { query: "select:" + [...new Set(plan.map((p) => p.name))].join(",") });
  }
  if (answered >= plan.length) return { content: [{ type: "text", text: "Done." }], stop: "end_turn" };
  const step = plan[answered];
  return call(answered, offeredAs(tools, step.name) || step.name, step.input);
}

// mentions tells whether the request names a tool anywhere (a deferred
// tool is named in the system prompt or a system message).
const mentions = (body, name) => JSON.stringify([body.system, body.messages]).includes(name);

function message(body, r) {
  return {
    id: "msg_standin_" + Date.now(), type: "message", role: "assistant", model: body.model || "stand-in",
    content: r.content, stop_reason: r.stop, stop_sequence: null,
    usage: { input_tokens: 10, output_tokens: 5, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
  };
}

function sse(res, body, r) {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
  const send = (event, data) => res.write(`event: ${event}\ndata: ${JSON.stringify({ type: event, ...data })}\n\n`);
  const m = message(body, r);
  send("message_start", { message: { ...m, content: [], stop_reason: null, usage: { ...m.usage, output_tokens: 1 } } });
  send("ping", {});
  r.content.forEach((b, index) => {
    if (b.type === "text") {
      send("content_block_start", { index, content_block: { type: "text", text: "" } });
      send("content_block_delta", { index, delta: { type: "text_delta", text: b.text } });
    } else {
      send("content_block_start", { index, content_block: { type: "tool_use", id: b.id, name: b.name, input: {} } });
      const json = JSON.stringify(b.input);
      // In two pieces, as a model streams it.
      const cut = Math.floor(json.length / 2);
      send("content_block_delta", { index, delta: { type: "input_json_delta", partial_json: json.slice(0, cut) } });
      send("content_block_delta", { index, delta: { type: "input_json_delta", partial_json: json.slice(cut) } });
    }
    send("content_block_stop", { index });
  });
  send("message_delta", { delta: { stop_reason: r.stop, stop_sequence: null }, usage: { output_tokens: 5 } });
  send("message_stop", {});
  res.end();
}

// The OpenAI Responses API, as Codex speaks it (wire_api = "responses"):
// the same plan, each call made as a function_call item. Codex offers an
// MCP server's tools as one namespace tool ("mcp__dshfs", holding "read",
// ...), so a planned "mcp__dshfs__read" is the function "read" in the
// namespace "mcp__dshfs"; outputs come back as function_call_output items.
const CALL = "call_standin_";

function responsesReply(body) {
  const offered = new Set();
  for (const t of body.tools || []) {
    if (t.type === "namespace") for (const f of t.tools || []) offered.add(t.name + "__" + f.name);
    else if (t.name) offered.add(t.name);
  }
  const done = new Set((body.input || []).filter((i) => i.type === "function_call_output" && String(i.call_id).startsWith(CALL)).map((i) => i.call_id));
  if (plan.length === 0 || !offered.has(plan[0].name) || done.size >= plan.length) {
    return { type: "message", id: "msg_standin", role: "assistant", status: "completed", content: [{ type: "output_text", text: done.size ? "Done." : "ok", annotations: [] }] };
  }
  const step = plan[done.size];
  const cut = step.name.lastIndexOf("__");
  return { type: "function_call", id: "fc_standin_" + done.size, call_id: CALL + done.size, namespace: step.name.slice(0, cut),
    name: step.name.slice(cut + 2), arguments: JSON.stringify(step.input), status: "completed" };
}

function responsesSSE(res, item) {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  const id = "resp_standin_" + Date.now();
  const send = (event, data) => res.write(`event: ${event}\ndata: ${JSON.stringify({ type: event, ...data })}\n\n`);
  send("response.created", { response: { id, object: "response", status: "in_progress", output: [] } });
  send("response.output_item.added", { output_index: 0, item });
  send("response.output_item.done", { output_index: 0, item });
  send("response.completed", { response: { id, object: "response", status: "completed", output: [item],
    usage: { input_tokens: 10, input_tokens_details: { cached_tokens: 0 }, output_tokens: 5, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 15 } } });
  res.end();
}

const server = http.createServer((req, res) => {
  let body = "";
  req.setEncoding("utf8");
  req.on("data", (c) => (body += c));
  req.on("end", () => {
    record(req, body);
    const path = req.url.split("?")[0];
    const json = (code, v) => { res.writeHead(code, { "content-type": "application/json" }); res.end(JSON.stringify(v)); };
    if (req.method === "POST" && path === "/v1/messages/count_tokens") return json(200, { input_tokens: 100 });
    if (req.method === "POST" && path === "/v1/messages") {
      let parsed;
      try { parsed = JSON.parse(body); } catch { return json(400, { type: "error", error: { type: "invalid_request_error", message: "bad JSON" } }); }
      const r = reply(parsed);
      return parsed.stream ? sse(res, parsed, r) : json(200, message(parsed, r));
    }
    if (req.method === "POST" && path === "/v1/responses") {
      let parsed;
      try { parsed = JSON.parse(body); } catch { return json(400, { error: { message: "bad JSON" } }); }
      return responsesSSE(res, responsesReply(parsed));
    }
    json(404, { type: "error", error: { type: "not_found_error", message: `no ${req.method} ${path} here` } });
  });
});

server.listen(Number(process.env.STANDIN_PORT || 0), "127.0.0.1", () => {
  const port = server.address().port;
  if (process.env.STANDIN_PORT_FILE) fs.writeFileSync(process.env.STANDIN_PORT_FILE, String(port));
  console.error(`stand-in listening on 127.0.0.1:${port}`);
});
for (const sig of ["SIGTERM", "SIGINT"]) process.on(sig, () => server.close(() => process.exit(0)));
