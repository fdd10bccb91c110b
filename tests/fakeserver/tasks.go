package main

import (
	"context"
	"fmt"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/bridge-mcp/bridge/tests/faketools"
)

// registerTaskTools adds task_sleep(seconds), which must be called as a
// task (execution.taskSupport "required") and answers "slept N" when the
// task ends, and task_optional(), which may be: it answers whether it was.
// mcp-go ends a task handler's context with the tools/call that created
// the task, so task_sleep sleeps on its own clock; tasks/cancel marks the
// task cancelled (the cancel log records it).
func registerTaskTools(s *server.MCPServer) {
	sleep := tool("task_sleep", "Sleep for the given number of seconds, as a task.", faketools.SleepSchema)
	sleep.Execution = &mcp.ToolExecution{TaskSupport: mcp.TaskSupportRequired}
	s.AddTaskTool(sleep, func(_ context.Context, req mcp.CallToolRequest) (*mcp.CreateTaskResult, error) {
		secs := req.GetFloat("seconds", 0)
		time.Sleep(time.Duration(secs * float64(time.Second)))
		return &mcp.CreateTaskResult{Content: []mcp.Content{mcp.NewTextContent(fmt.Sprintf("slept %g", secs))}}, nil
	})
	opt := tool("task_optional", "Say whether the call came as a task.", emptySchema)
	opt.Execution = &mcp.ToolExecution{TaskSupport: mcp.TaskSupportOptional}
	s.AddTool(opt, func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText(fmt.Sprintf("as a task: %v", req.Params.Task != nil)), nil
	})
}
