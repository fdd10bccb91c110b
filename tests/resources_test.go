package tests

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// TestResources reads upstream resources from Python: the real everything
// server's resource links read back as bytes (its blob resources) and str
// (its text ones) from the server that returned them, its resources and
// templates list, the raw runtime.read_resource works, also from a job; a
// fake server's image resource is an Image display() shows. Reads obey the
// grant, count toward maxToolCallsPerExecution, can be turned off per
// server in the policy, and a reply over the frame cap is refused with the
// setting's name while the session keeps working.
func TestResources(t *testing.T) {
	requirePodman(t)
	env := withServers(t, map[string]any{
		"everything": map[string]any{"command": npmBin(t, "mcp-server-everything")},
		"files":      fake(),
	}, map[string]string{"MCP_BRIDGE_MAX_FRAME_BYTES": "1048576"})
	b := startBridge(t, env)

	got := b.mustOK(`r = await mcp_everything.get_resource_links(count=2)
print(r[0])
blob, txt = r[1], r[2]
print(type(blob).__name__, blob.uri, blob.name, blob.mime_type)
print(repr(await blob.read()))
print(repr(await txt.read()))
ls = await mcp_everything.list_resources()
print(len(ls) > 0, all(type(l).__name__ == 'ResourceLink' for l in ls))
print(sorted(t['uriTemplate'] for t in await mcp_everything.list_resource_templates()))
print(await runtime.read_resource('everything', 'demo://resource/dynamic/text/3'))
print(runtime.result(runtime.start("await runtime.read_resource('everything', 'demo://resource/dynamic/text/5')"), wait=30))`, "everything")
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`Here are 2 resource links`),
		regexp.MustCompile(`ResourceLink demo://resource/dynamic/blob/1 Blob Resource 1 text/plain`),
		regexp.MustCompile(`b'Resource 1: This is a base64 blob created at [^']+'`),
		regexp.MustCompile(`'Resource 2: This is a plaintext resource created at [^']+'`),
		regexp.MustCompile(`True True`),
		regexp.MustCompile(`'demo://resource/dynamic/blob/\{resourceId\}', 'demo://resource/dynamic/text/\{resourceId\}'`),
		regexp.MustCompile(`Resource 3: This is a plaintext resource`),
		regexp.MustCompile(`Resource 5: This is a plaintext resource`),
	} {
		if !want.MatchString(got) {
			t.Errorf("output does not match %s:\n%s", want, got)
		}
	}

	r := b.call(map[string]any{"code": "img = await runtime.read_resource('files', 'mem://image')\nprint(type(img).__name__)\ndisplay(img)",
		"servers": []string{"files"}, "timeout": 30})
	images := 0
	for _, c := range r.Content {
		if _, ok := c.(mcp.ImageContent); ok {
			images++
		}
	}
	if got := text(t, r); r.IsError || images != 1 || !strings.Contains(got, "Image") {
		t.Errorf("image resource: %d images, text %s", images, got)
	}

	for _, c := range []struct {
		code    string
		servers []string
		want    string
	}{
		{"await runtime.read_resource('files', 'mem://big/2000000')", []string{"files"},
			"MCPError: Resource mem://big/2000000 of server 'files': the reply is over the 1048576-byte frame limit (MCP_BRIDGE_MAX_FRAME_BYTES)"},
		{"await runtime.read_resource('files', 'mem://image')", []string{"everything"},
			"server 'files' is configured but not granted to this call; pass servers=[\"files\"] to run_python"},
		{"await mcp_files.read_resource('mem://big/3')", []string{"files"}, "'xxx'"},
	} {
		r := b.call(map[string]any{"code": c.code, "servers": c.servers, "timeout": 30})
		if got := text(t, r); !strings.Contains(got, c.want) {
			t.Errorf("%s\n got: %s\nwant containing: %s", c.code, got, c.want)
		}
	}

	policy := filepath.Join(env["MCP_BRIDGE_CONFIG_DIR"], "bridge.policy")
	if err := os.WriteFile(policy, []byte(`{"maxToolCallsPerExecution": 3, "servers": {"files": {"resources": false}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ code, want string }{
		{"await runtime.read_resource('files', 'mem://image')",
			"MCPError: Resources of server 'files' are turned off by the policy (\"resources\": false in " + policy + ")"},
		{"await mcp_files.list_resources()", "turned off by the policy"},
		{"await mcp_files.add(1, 2)", "{'sum': 3}"},
		{"for i in range(3):\n    await mcp_everything.read_resource('demo://resource/dynamic/text/1')\nawait mcp_everything.read_resource('demo://resource/dynamic/text/1')",
			"MCPError: Tool call limit of 3 per execution reached (maxToolCallsPerExecution in " + policy + ")"},
	} {
		r := b.call(map[string]any{"code": c.code, "servers": []string{"files", "everything"}, "timeout": 30})
		if got := text(t, r); !strings.Contains(got, c.want) {
			t.Errorf("%s\n got: %s\nwant containing: %s", c.code, got, c.want)
		}
	}
}
