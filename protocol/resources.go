package protocol

// Box→host requests for the resources of a server the call grants. Each
// is forwarded to the server as the MCP request of the same meaning, and
// answered with that request's raw result:
//
//   - list_resources {server} → {resources: [Resource]} (every page)
//   - list_resource_templates {server} → {resourceTemplates: [ResourceTemplate]}
//   - read_resource {server, uri} → {contents: [TextResourceContents |
//     BlobResourceContents]}
//
// Like call_tool they obey the call's grant, the policy's "resources"
// switch and its cap on calls per execution.
const (
	MethodListResources         = "list_resources"
	MethodListResourceTemplates = "list_resource_templates"
	MethodReadResource          = "read_resource"
)
