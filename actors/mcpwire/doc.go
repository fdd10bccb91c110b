// Package mcpwire reads what upstream MCP servers send, which the bridge
// does not trust (issue 34): a server may send frames over any size, nested
// past any decoder's depth, with wrong JSON types, invalid UTF-8, stray or
// repeated ids, floods of notifications and requests, or stop reading.
//
// Transport is the MCP client transport (mcp-go's
// transport.BidirectionalInterface) over a stdio server's pipes. HTTPFilter
// holds a streamable-HTTP or SSE server's response bodies to the same rules,
// under mcp-go's HTTP transports. Both keep these invariants:
//   - a frame costs at most the frame cap (MCP_BRIDGE_MAX_FRAME_BYTES) of
//     memory, whatever its size;
//   - a reply the bridge cannot use (over the cap, nested deeper than
//     MaxDepth, a wrong JSON type, not JSON) still ends the request it
//     answers, at once, with one line that says what was wrong
//     (BadReplyError): its id is read by a streaming scan that neither
//     recurses nor keeps the frame;
//   - invalid UTF-8 is replaced with U+FFFD before anything decodes it.
//
// It imports protocol/printable only; the actors use it.
package mcpwire
