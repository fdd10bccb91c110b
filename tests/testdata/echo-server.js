// The smallest stdio MCP server, run by node inside the bridge's own image
// (TestKubeDeployment passes it with node -e): one tool, echo.
const rl = require("readline").createInterface({ input: process.stdin });
const send = (m) => process.stdout.write(JSON.stringify(m) + "\n");
rl.on("line", (line) => {
  let m;
  try { m = JSON.parse(line); } catch { return; }
  if (m.id === undefined) return; // a notification
  const p = m.params || {};
  let result;
  switch (m.method) {
    case "initialize":
      result = { protocolVersion: p.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: "echo", version: "1" } };
      break;
    case "tools/list":
      result = { tools: [{ name: "echo", description: "Echo text back.",
        inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] } }] };
      break;
    case "tools/call":
      result = { content: [{ type: "text", text: "echo: " + ((p.arguments || {}).text || "") }] };
      break;
    case "ping":
      result = {};
      break;
    default:
      send({ jsonrpc: "2.0", id: m.id, error: { code: -32601, message: "no method " + m.method } });
      return;
  }
  send({ jsonrpc: "2.0", id: m.id, result });
});
