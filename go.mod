module github.com/bridge-mcp/bridge

go 1.26.0

require (
	github.com/mark3labs/mcp-go v1.2.1
	github.com/rs/zerolog v1.35.1
	github.com/sourcegraph/jsonrpc2 v0.2.3
	github.com/thejerf/suture/v4 v4.0.6
	github.com/tiktoken-go/tokenizer v0.10.0
	go.uber.org/goleak v1.3.0
	golang.org/x/sys v0.49.0
)

require (
	github.com/dlclark/regexp2/v2 v2.5.1 // indirect
	github.com/google/jsonschema-go v0.4.2 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/mattn/go-colorable v0.1.14 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.2 // indirect
	github.com/spf13/cast v1.7.1 // indirect
	github.com/yosida95/uritemplate/v3 v3.0.2 // indirect
	golang.org/x/text v0.14.0 // indirect
)
